package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSecondsExact(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {90 * time.Minute, "5400"}, {1500 * time.Millisecond, "1.5"}, {time.Nanosecond, "0.000000001"},
		{-2500 * time.Millisecond, "-2.5"}, {1<<63 - 1, "9223372036.854775807"},
	} {
		if got := Seconds(c.d); string(got) != c.want {
			t.Errorf("Seconds(%v) = %s, want %s", c.d, got, c.want)
		}
		back, err := ParseSeconds(Seconds(c.d))
		if err != nil || back != c.d {
			t.Errorf("ParseSeconds(Seconds(%v)) = %v, %v", c.d, back, err)
		}
	}
	if d, err := ParseSeconds("1e3"); err != nil || d != 1000*time.Second {
		t.Errorf("ParseSeconds(1e3) = %v, %v", d, err)
	}
	for _, bad := range []json.Number{"x", "1e300"} {
		if _, err := ParseSeconds(bad); err == nil {
			t.Errorf("ParseSeconds(%s): no error", bad)
		}
	}
}

// A record's durations are seconds in fields ending _s, read back
// exactly; one of before schema 6 (nanoseconds) reads the same.
func TestJobJSONDurations(t *testing.T) {
	j := Job{ID: 7, Spec: Spec{Argv: []string{"x"}, GPUs: 1, Timeout: 90*time.Minute + 500*time.Millisecond, SignalGrace: 30 * time.Second},
		CancelRequested: &CancelRequest{By: "ann", Grace: 10 * time.Second}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"timeout_s":5400.5`, `"signal_grace_s":30`, `"grace_s":10`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	for _, gone := range []string{`"timeout":`, `"signal_grace":`, `"grace_ns"`} {
		if strings.Contains(string(b), gone) {
			t.Errorf("%s has %s", b, gone)
		}
	}
	old := `{"id":7,"spec":{"argv":["x"],"gpus":1,"priority":0,"host":"","workdir":"","timeout":5400500000000,"signal_grace":30000000000},
		"cancel_requested":{"by":"ann","at":"0001-01-01T00:00:00Z","grace_ns":10000000000},"state":"","user":"","submitted_at":"0001-01-01T00:00:00Z"}`
	for name, in := range map[string]string{"new": string(b), "before schema 6": old} {
		var got Job
		if err := json.Unmarshal([]byte(in), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Spec.Timeout != j.Spec.Timeout || got.Spec.SignalGrace != j.Spec.SignalGrace || got.CancelRequested.Grace != 10*time.Second ||
			got.Spec.Argv[0] != "x" || got.CancelRequested.By != "ann" {
			t.Errorf("%s: read back %+v, cancel %+v", name, got.Spec, got.CancelRequested)
		}
	}
	var s Spec
	if err := json.Unmarshal([]byte(`{"timeout_s":"soon"}`), &s); err == nil {
		t.Error("timeout_s \"soon\": no error")
	}
	if b, _ := json.Marshal(Spec{}); strings.Contains(string(b), "_s") {
		t.Errorf("zero spec %s: durations not left out", b)
	}
}

func TestRef(t *testing.T) {
	if got := (Job{ID: 18}).Ref(); got != "18" {
		t.Errorf("job 18: %s", got)
	}
	if got := (Job{ID: 18, Spec: Spec{Array: &ArrayTask{Job: 16, Task: 2, Tasks: 3}}}).Ref(); got != "16_2" {
		t.Errorf("task 2 of array 16: %s", got)
	}
}
