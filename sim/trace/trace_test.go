package trace

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const hdr = Header + "\n"

func read(t *testing.T, name, text string) *Trace {
	t.Helper()
	tr, err := Read(name, strings.NewReader(text))
	if err != nil {
		t.Fatalf("Read(%s): %v", name, err)
	}
	return tr
}

func TestReadErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		{"empty", "", "t.csv: empty file; give a CSV file with the header job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class and one row per job"},
		{"blank lines", "\n\n", "t.csv: empty file; give a CSV file with the header job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class and one row per job"},
		{"header only", hdr, "t.csv: no jobs (only a header); give one row per job under the header"},
		{"header only, no newline", Header, "t.csv: no jobs (only a header); give one row per job under the header"},
		{"missing column", "job,submit_s,gpus\na,0,1\n",
			"t.csv:1: no column duration_s in the header (job,submit_s,gpus); give the header job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class"},
		{"missing columns", "id,submit,gpus,duration_s\na,0,1,5\n",
			"t.csv:1: no columns job, submit_s in the header (id,submit,gpus,duration_s); give the header job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class"},
		{"column twice", "job,submit_s,gpus,duration_s,gpus\na,0,1,5,1\n", `t.csv:1: column "gpus" appears twice (fields 3 and 5); keep one`},
		{"fields", hdr + "a,0,,1,1.0,60,\nb,1,,1,1.0\n", "t.csv:3: 5 fields, but the header has 7; give one value per header column"},
		{"bad quotes", hdr + "a,0,,1,1.0,60,\nb\"x,1,,1,1.0,60,\n", `t.csv:3: bad CSV at column 2: bare " in non-quoted-field; check the quotes`},

		{"job empty", hdr + " ,0,,1,1.0,60,\n", "t.csv:2: job: empty; give the job's id"},
		{"job twice", hdr + "a,0,,1,1.0,60,\nb,1,,1,1.0,60,\na,2,,1,1.0,60,\n", `t.csv:4: job: "a" appears again (first at line 2); give every job its own id`},

		{"submit text", hdr + "a,soon,,1,1.0,60,\n", `t.csv:2: submit_s: "soon" is not a number; give seconds after the first job, a number >= 0`},
		{"submit empty", hdr + "a,,,1,1.0,60,\n", "t.csv:2: submit_s: empty; give seconds after the first job, a number >= 0"},
		{"submit negative", hdr + "a,-5,,1,1.0,60,\n", "t.csv:2: submit_s: -5 is negative; give seconds after the first job, a number >= 0"},
		{"submit -Inf", hdr + "a,-Inf,,1,1.0,60,\n", "t.csv:2: submit_s: -Inf is negative; give seconds after the first job, a number >= 0"},
		{"submit NaN", hdr + "a,NaN,,1,1.0,60,\n", `t.csv:2: submit_s: "NaN" is not a number; give seconds after the first job, a number >= 0`},
		{"submit too large", hdr + "a,1e10,,1,1.0,60,\n", "t.csv:2: submit_s: 1e10 is too large; give at most 9223372036 s (292 years)"},
		{"submit Inf", hdr + "a,Inf,,1,1.0,60,\n", "t.csv:2: submit_s: Inf is too large; give at most 9223372036 s (292 years)"},

		{"gpus text", hdr + "a,0,,two,1.0,60,\n", `t.csv:2: gpus: "two" is not a whole number; give the GPU count, a whole number >= 1`},
		{"gpus decimal", hdr + "a,0,,1.5,1.0,60,\n", `t.csv:2: gpus: "1.5" is not a whole number; give the GPU count, a whole number >= 1`},
		{"gpus empty", hdr + "a,0,,,1.0,60,\n", "t.csv:2: gpus: empty; give the GPU count, a whole number >= 1"},
		{"gpus 0", hdr + "a,0,,0,1.0,60,\n", "t.csv:2: gpus: 0 is less than 1; give the GPU count, a whole number >= 1"},
		{"gpus negative", hdr + "a,0,,-2,1.0,60,\n", "t.csv:2: gpus: -2 is less than 1; give the GPU count, a whole number >= 1"},
		{"gpus huge", hdr + "a,0,,99999999999999999999,1.0,60,\n", "t.csv:2: gpus: 99999999999999999999 is too large; give the GPU count, a whole number >= 1"},

		{"fraction text", hdr + "a,0,,1,half,60,\n", `t.csv:2: gpu_fraction: "half" is not a number; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)`},
		{"fraction NaN", hdr + "a,0,,1,NaN,60,\n", `t.csv:2: gpu_fraction: "NaN" is not a number; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)`},
		{"fraction empty", hdr + "a,0,,1,,60,\n", "t.csv:2: gpu_fraction: empty; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)"},
		{"fraction 0", hdr + "a,0,,1,0,60,\n", "t.csv:2: gpu_fraction: 0 is outside (0, 1]; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)"},
		{"fraction negative", hdr + "a,0,,1,-0.5,60,\n", "t.csv:2: gpu_fraction: -0.5 is outside (0, 1]; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)"},
		{"fraction above 1", hdr + "a,0,,1,1.5,60,\n", "t.csv:2: gpu_fraction: 1.5 is outside (0, 1]; give the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)"},
		{"fraction with gpus 2", hdr + "a,0,,2,0.5,60,\n", "t.csv:2: gpu_fraction: 0.5 with gpus 2; a share below 1 is allowed only with gpus 1: give 1.0, or gpus 1"},

		{"duration text", hdr + "a,0,,1,1.0,1h,\n", `t.csv:2: duration_s: "1h" is not a number; give the run time in seconds, a number >= 0`},
		{"duration empty", hdr + "a,0,,1,1.0,,\n", "t.csv:2: duration_s: empty; give the run time in seconds, a number >= 0"},
		{"duration negative", hdr + "a,0,,1,1.0,-60,\n", "t.csv:2: duration_s: -60 is negative; give the run time in seconds, a number >= 0"},
		{"duration NaN", hdr + "a,0,,1,1.0,nan,\n", `t.csv:2: duration_s: "nan" is not a number; give the run time in seconds, a number >= 0`},

		// Fail fast: the first bad value is the one reported.
		{"first error only", hdr + "a,0,,1,1.0,60,\nb,x,,0,2,-1,\nc,-1,,1,1.0,60,\n", `t.csv:3: submit_s: "x" is not a number; give seconds after the first job, a number >= 0`},
		// Lines count the file's lines, also across a quoted newline.
		{"line after quoted newline", hdr + "a,0,\"two\nlines\",1,1.0,60,\nb,1,,0,1.0,60,\n", "t.csv:4: gpus: 0 is less than 1; give the GPU count, a whole number >= 1"},
		// Columns in another order.
		{"other order", "gpus,duration_s,job,submit_s\n1,60,a,0\n0,60,b,1\n", "t.csv:3: gpus: 0 is less than 1; give the GPU count, a whole number >= 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Read("t.csv", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Read = %d jobs, no error; want %q", len(tr.Jobs), tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Read error\n got %q\nwant %q", err, tt.want)
			}
		})
	}
}

func TestReadMessagesUseTheNameGiven(t *testing.T) {
	_, err := Read("traces/x.norm.csv", strings.NewReader(hdr+"a,0,,0,1.0,60,\n"))
	if want := "traces/x.norm.csv:2: gpus: 0 is less than 1; give the GPU count, a whole number >= 1"; err == nil || err.Error() != want {
		t.Errorf("error %v; want %q", err, want)
	}
	tr := read(t, "traces/x.norm.csv", hdr+"a,0,,1,1.0,60,\n")
	if tr.Name != "x.norm.csv" {
		t.Errorf("Name = %q; want the base name x.norm.csv", tr.Name)
	}
}

func TestReadValues(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     []Job
	}{
		{"normalized", hdr + "j1,0,alice,1,0.25,90,BE\nj2,1.5,,8,1.0,3600,LS\n", []Job{
			{ID: "j1", Submit: 0, User: "alice", GPUs: 1, Fraction: 0.25, Duration: 90 * time.Second, Class: "BE", Line: 2},
			{ID: "j2", Submit: 1500 * time.Millisecond, GPUs: 8, Fraction: 1, Duration: time.Hour, Class: "LS", Line: 3},
		}},
		{"any order, extra columns, optional ones absent", "note,duration_s,gpus,submit_s,job\nx,60,2,10,b\ny,30,1,20,a\n", []Job{
			{ID: "b", Submit: 10 * time.Second, GPUs: 2, Fraction: 1, Duration: time.Minute, Line: 2},
			{ID: "a", Submit: 20 * time.Second, GPUs: 1, Fraction: 1, Duration: 30 * time.Second, Line: 3},
		}},
		{"byte order mark, spaces, CRLF, no final newline", "\ufeffjob, submit_s ,gpus,duration_s\r\n a , 5 , 4 , 7 \r\nb,6,1,8", []Job{
			{ID: "a", Submit: 5 * time.Second, GPUs: 4, Fraction: 1, Duration: 7 * time.Second, Line: 2},
			{ID: "b", Submit: 6 * time.Second, GPUs: 1, Fraction: 1, Duration: 8 * time.Second, Line: 3},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "t.csv", tt.in)
			if !slices.Equal(tr.Jobs, tt.want) {
				t.Errorf("Jobs\n got %+v\nwant %+v", tr.Jobs, tt.want)
			}
			if len(tr.Warnings) != 0 {
				t.Errorf("Warnings = %q; want none", tr.Warnings)
			}
		})
	}
}

func TestReadRepairs(t *testing.T) {
	ids := func(tr *Trace) string {
		var s []string
		for _, j := range tr.Jobs {
			s = append(s, fmt.Sprintf("%s@%d:%d", j.ID, j.Submit/time.Second, j.Line))
		}
		return strings.Join(s, " ")
	}
	for _, tt := range []struct {
		name, in, wantJobs string
		wantWarnings       []string
		oneSecond          []string // jobs whose 0 s became 1 s
	}{
		{"sorted", hdr + "a,0,,1,1.0,60,\nb,0,,1,1.0,60,\nc,5,,1,1.0,60,\n", "a@0:2 b@0:3 c@5:4", nil, nil},
		{"unsorted: sorted stably, one warning", hdr +
			"a,10,,1,1.0,60,\n" + // line 2
			"b,20,,1,1.0,60,\n" + // 3
			"c,5,,1,1.0,60,\n" + // 4: the first out of order
			"d,10,,1,1.0,60,\n" + // 5: same time as a, after it in the file
			"e,1,,1,1.0,60,\n", // 6: out of order again, no second warning
			"e@1:6 c@5:4 a@10:2 d@10:5 b@20:3",
			[]string{"itp.norm.csv: rows not sorted by submit_s (first at line 4): sorted"}, nil},
		{"zero duration: 1 s", hdr + "a,0,,1,1.0,0,\nb,1,,1,1.0,60,\n", "a@0:2 b@1:3",
			[]string{"itp.norm.csv: 1 job has duration_s 0 (first at line 2): kept as 1 s"}, []string{"a"}},
		{"zero durations and unsorted", hdr + "a,9,,1,1.0,60,\nb,1,,1,1.0,0,\nc,2,,1,1.0,0.0,\n", "b@1:3 c@2:4 a@9:2",
			[]string{
				"itp.norm.csv: rows not sorted by submit_s (first at line 3): sorted",
				"itp.norm.csv: 2 jobs have duration_s 0 (first at line 3): kept as 1 s",
			}, []string{"b", "c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "itp.norm.csv", tt.in)
			if got := ids(tr); got != tt.wantJobs {
				t.Errorf("jobs (id@submit:line) = %s; want %s", got, tt.wantJobs)
			}
			if !slices.Equal(tr.Warnings, tt.wantWarnings) {
				t.Errorf("Warnings = %q; want %q", tr.Warnings, tt.wantWarnings)
			}
			for _, j := range tr.Jobs {
				want := time.Minute
				if slices.Contains(tt.oneSecond, j.ID) {
					want = time.Second
				}
				if j.Duration != want {
					t.Errorf("job %s: Duration %v; want %v", j.ID, j.Duration, want)
				}
			}
		})
	}
}

func TestAssignUsers(t *testing.T) {
	const in = hdr + "a,0,,1,1.0,60,\nb,2,,1,1.0,60,\nc,1,,1,1.0,60,\nd,3,,1,1.0,60,\ne,4,,1,1.0,60,\n"
	for _, tt := range []struct {
		n    int
		want string // users of the jobs in Submit order: a c b d e
	}{
		{1, "u00 u00 u00 u00 u00"},
		{2, "u00 u01 u00 u01 u00"},
		{3, "u00 u01 u02 u00 u01"},
		{1000, "u00 u01 u02 u03 u04"},
	} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			tr := read(t, "t.csv", in)
			if err := tr.AssignUsers(tt.n); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range tr.Jobs {
				got = append(got, j.User)
			}
			if strings.Join(got, " ") != tt.want || tr.Jobs[1].ID != "c" {
				t.Errorf("users = %s (second job %s); want %s (second job c)", strings.Join(got, " "), tr.Jobs[1].ID, tt.want)
			}
			if !tr.UsersMadeUp {
				t.Error("UsersMadeUp = false; want true")
			}
		})
	}
	// The 101st of 1000 users.
	tr := read(t, "t.csv", in)
	tr.Jobs = slices.Repeat(tr.Jobs[:1], 102)
	if err := tr.AssignUsers(1000); err != nil || tr.Jobs[101].User != "u101" {
		t.Errorf("job 101 of 1000 users: %q, %v; want u101", tr.Jobs[101].User, err)
	}

	for _, tt := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"n 0", in, 0, "t.csv: 0 users to make up; give 1 to 1000"},
		{"n negative", in, -3, "t.csv: -3 users to make up; give 1 to 1000"},
		{"n 1001", in, 1001, "t.csv: 1001 users to make up; give 1 to 1000"},
		{"has users", hdr + "a,0,,1,1.0,60,\nb,1,bob,1,1.0,60,\n", 4,
			`t.csv:3: user: the trace has users already ("bob" for job b); it is only for a trace without users that making users up makes sense`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "t.csv", tt.in)
			err := tr.AssignUsers(tt.n)
			if err == nil || err.Error() != tt.want {
				t.Errorf("AssignUsers(%d) = %v; want %q", tt.n, err, tt.want)
			}
			if tr.UsersMadeUp || tr.Jobs[0].User != "" {
				t.Errorf("after the error: UsersMadeUp %v, first user %q; want the trace unchanged", tr.UsersMadeUp, tr.Jobs[0].User)
			}
		})
	}
	// Users made up once cannot be made up again.
	tr = read(t, "t.csv", in)
	if err := tr.AssignUsers(2); err != nil {
		t.Fatal(err)
	}
	if err := tr.AssignUsers(3); err == nil {
		t.Error("AssignUsers twice: no error")
	}
}

func TestUsersFrom(t *testing.T) {
	// Three jobs of the Philly excerpt, as in testdata: normalized ids are
	// philly-<src_row>; the raw rows are in the source's order.
	const philly = hdr +
		"philly-47183,0,,1,1.0,72,\n" +
		"philly-10622,6212,,8,1.0,514025,\n" +
		"philly-47058,18883,,1,1.0,4074,\n"
	const phillyRaw = "src_row,timestamp,duration,num_gpus,gpu_time,cluster\n" +
		"10622,2017-10-21 01:45:27,514025.0,8,4112200.0,ee9e8c\n" +
		"47058,2017-10-21 05:16:38,4074.0,1,4074.0,6c71a0\n" +
		"47183,2017-10-21 00:01:55,72.0,1,72.0,11cb48\n" +
		"8776,2017-10-23 03:39:15,526952.0,1,526952.0,6214e9\n" // no job of the trace: ignored
	for _, tt := range []struct {
		name, trace, raw, column string
		want                     string // users in Submit order
	}{
		{"philly src_row", philly, phillyRaw, "cluster", "11cb48 ee9e8c 6c71a0"},
		{"job_id (ITP)", hdr + "u1,0,,1,1.0,60,\nu2,5,,1,1.0,60,\n", "job_id,submission_time,duration,num_gpu,team\nu2,9945,60,1,vision\nu1,9940,60,1,speech\n", "team", "speech vision"},
		{"name (Alibaba) before src_row", hdr + "p1,0,,1,1.0,60,\n", "src_row,name,qos\n7,p1,LS\n", "qos", "LS"},
		{"job first", hdr + "x,0,,1,1.0,60,\n", "name,job,owner\ny,x,carol\n", "owner", "carol"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "t.norm.csv", tt.trace)
			if err := tr.UsersFrom("raw.csv", strings.NewReader(tt.raw), tt.column); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range tr.Jobs {
				got = append(got, j.User)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("users = %q; want %q", strings.Join(got, " "), tt.want)
			}
			if tr.UsersMadeUp {
				t.Error("UsersMadeUp = true; want false")
			}
		})
	}

	for _, tt := range []struct {
		name, trace, raw, column, want string
	}{
		{"column missing", philly, phillyRaw, "vc",
			`raw.csv:1: no column "vc" in the header (src_row,timestamp,duration,num_gpus,gpu_time,cluster); give the raw column that holds the users, such as cluster for Philly`},
		{"no column to join on", philly, "timestamp,cluster\n2017-10-21 00:01:55,6214e9\n", "cluster",
			"raw.csv:1: no column to join on in the header (timestamp,cluster); give a raw file with a column job, job_id or name (the job id) or src_row (Philly)"},
		{"jobs without a raw row", philly, "src_row,cluster\n10622,ee9e8c\n1,x\n", "cluster",
			"t.norm.csv: 2 of 3 jobs have no row in raw.csv (the first: job philly-47183 at line 2); give the raw file that t.norm.csv was made from, keyed by src_row"},
		{"duplicate raw key", philly, "src_row,cluster\n47183,11cb48\n10622,ee9e8c\n47183,6c71a0\n", "cluster",
			"raw.csv:4: src_row: 47183 appears again (first at line 2); the key to join on must be unique"},
		{"empty raw key", philly, "src_row,cluster\n47183,11cb48\n,6c71a0\n", "cluster",
			"raw.csv:3: src_row: empty; give every row its key"},
		{"empty user", philly, "src_row,cluster\n47183,11cb48\n10622,\n47058,6c71a0\n", "cluster",
			"raw.csv:3: cluster: empty for job philly-10622; give every job a user"},
		{"raw fields", philly, "src_row,cluster\n47183\n", "cluster",
			"raw.csv:2: 1 fields, but the header has 2; give one value per header column"},
		{"raw empty", philly, "", "cluster",
			"raw.csv: empty file; give the raw trace, with its header, that t.norm.csv was made from"},
		{"has users", hdr + "a,0,ann,1,1.0,60,\n", "job,cluster\na,x\n", "cluster",
			`t.norm.csv:2: user: the trace has users already ("ann" for job a); it is only for a trace without users that taking users from raw.csv makes sense`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "t.norm.csv", tt.trace)
			before := slices.Clone(tr.Jobs)
			err := tr.UsersFrom("raw.csv", strings.NewReader(tt.raw), tt.column)
			if err == nil || err.Error() != tt.want {
				t.Errorf("UsersFrom error\n got %v\nwant %q", err, tt.want)
			}
			if !slices.Equal(tr.Jobs, before) {
				t.Errorf("after the error the jobs changed: %+v", tr.Jobs)
			}
		})
	}
}

// hand is a trace worked by hand:
//
//	job  submit  gpus × fraction × duration = GPU-s
//	a      0 s   1 × 1   × 100 s  = 100
//	b     50 s   2 × 1   ×  50 s  = 100
//	c    100 s   1 × 0.5 ×  40 s  =  20
//	d    200 s   8 × 1   ×  10 s  =  80
//
// Span 200 s; GPU-s 300 (all), 220 (<= 4 GPUs), 120 (1 GPU).
const hand = hdr +
	"a,0,,1,1.0,100,\n" +
	"b,50,,2,1.0,50,\n" +
	"c,100,,1,0.5,40,\n" +
	"d,200,,8,1.0,10,\n"

func TestLoadArithmetic(t *testing.T) {
	tr := read(t, "hand.csv", hand)
	if got := tr.Span(); got != 200*time.Second {
		t.Errorf("Span = %v; want 200s", got)
	}
	for _, tt := range []struct {
		labGPUs, maxGPUs int
		gpuSeconds, load float64
	}{
		{2, 8, 300, 0.75},     // 300 / (2 × 200)
		{2, 4, 220, 0.55},     // 220 / (2 × 200)
		{4, 1, 120, 0.15},     // 120 / (4 × 200)
		{1, 100, 300, 1.5},    // 300 / (1 × 200)
		{2, 0, 0, 0},          // nothing placeable
		{0, 8, 300, 0},        // no lab
		{-1, 8, 300, 0},       // no lab
		{16, 8, 300, 0.09375}, // 300 / (16 × 200)
	} {
		if got := tr.GPUSeconds(tt.maxGPUs); got != tt.gpuSeconds {
			t.Errorf("GPUSeconds(%d) = %v; want %v", tt.maxGPUs, got, tt.gpuSeconds)
		}
		if got := tr.Load(tt.labGPUs, tt.maxGPUs); math.Abs(got-tt.load) > 1e-12 {
			t.Errorf("Load(%d, %d) = %v; want %v", tt.labGPUs, tt.maxGPUs, got, tt.load)
		}
	}

	// Scale(2): submits 0, 100, 200, 400; span 400 s; load 300/(2×400).
	tr.Scale(2)
	for i, want := range []time.Duration{0, 100 * time.Second, 200 * time.Second, 400 * time.Second} {
		if tr.Jobs[i].Submit != want {
			t.Errorf("after Scale(2): job %s submit %v; want %v", tr.Jobs[i].ID, tr.Jobs[i].Submit, want)
		}
	}
	for i, want := range []time.Duration{100 * time.Second, 50 * time.Second, 40 * time.Second, 10 * time.Second} {
		if tr.Jobs[i].Duration != want {
			t.Errorf("after Scale(2): job %s duration %v; want %v unchanged", tr.Jobs[i].ID, tr.Jobs[i].Duration, want)
		}
	}
	if got := tr.Load(2, 8); got != 0.375 {
		t.Errorf("after Scale(2): Load(2, 8) = %v; want 0.375", got)
	}
	tr.Scale(0.25) // span 100 s
	if got := tr.Span(); got != 100*time.Second {
		t.Errorf("after Scale(0.25): Span = %v; want 100s", got)
	}

	// One job, or all at once: span 0 and load 0, not +Inf.
	for _, in := range []string{hdr + "a,7,,1,1.0,60,\n", hdr + "a,7,,1,1.0,60,\nb,7,,2,1.0,60,\n"} {
		tr := read(t, "t.csv", in)
		if tr.Span() != 0 || tr.Load(1, 8) != 0 {
			t.Errorf("%q: Span %v, Load %v; want 0, 0", in, tr.Span(), tr.Load(1, 8))
		}
	}
	if (&Trace{}).Span() != 0 {
		t.Error("empty trace: Span != 0")
	}
}

func TestScalePanics(t *testing.T) {
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Scale(%v) did not panic", f)
				}
			}()
			read(t, "t.csv", hand).Scale(f)
		}()
	}
}

func TestScaleToLoad(t *testing.T) {
	for _, tt := range []struct {
		target           float64
		labGPUs, maxGPUs int
		factor           float64
		span             time.Duration
	}{
		{1.5, 2, 8, 0.5, 100 * time.Second},     // natural 0.75: half the span doubles the load
		{0.375, 2, 8, 2, 400 * time.Second},     // twice the span halves it
		{0.75, 2, 8, 1, 200 * time.Second},      // already there
		{0.55, 2, 4, 1, 200 * time.Second},      // only jobs of <= 4 GPUs count
		{1.1, 2, 4, 0.5, 100 * time.Second},     // 0.55 / 1.1
		{0.03, 16, 8, 3.125, 625 * time.Second}, // 0.09375 / 0.03
	} {
		t.Run(fmt.Sprint(tt.target, tt.labGPUs, tt.maxGPUs), func(t *testing.T) {
			tr := read(t, "hand.csv", hand)
			factor, err := tr.ScaleToLoad(tt.target, tt.labGPUs, tt.maxGPUs)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(factor-tt.factor) > 1e-12 {
				t.Errorf("factor = %v; want %v", factor, tt.factor)
			}
			if got := tr.Span(); got != tt.span {
				t.Errorf("Span = %v; want %v", got, tt.span)
			}
			if got := tr.Load(tt.labGPUs, tt.maxGPUs); math.Abs(got-tt.target) > 1e-9 {
				t.Errorf("Load = %v; want %v", got, tt.target)
			}
		})
	}

	for _, tt := range []struct {
		name             string
		in               string
		target           float64
		labGPUs, maxGPUs int
		want             string
	}{
		{"load 0", hand, 0, 2, 8, "--load must be more than 0, got 0"},
		{"load negative", hand, -0.5, 2, 8, "--load must be more than 0, got -0.5"},
		{"load NaN", hand, math.NaN(), 2, 8, "--load must be more than 0, got NaN"},
		{"load Inf", hand, math.Inf(1), 2, 8, "--load must be a finite number, got +Inf"},
		{"no lab", hand, 0.5, 0, 8, "the lab must have at least 1 GPU, got 0"},
		{"span 0", hdr + "a,5,,1,1.0,60,\nb,5,,1,1.0,60,\n", 0.5, 2, 8, "t.csv: all jobs are submitted at the same time (span 0 s); there is no load to scale"},
		{"nothing placeable", hand, 0.5, 2, 0, "t.csv: no job asks for 0 GPUs or fewer; there is no load to scale"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := read(t, "t.csv", tt.in)
			before := slices.Clone(tr.Jobs)
			factor, err := tr.ScaleToLoad(tt.target, tt.labGPUs, tt.maxGPUs)
			if err == nil || err.Error() != tt.want || factor != 0 {
				t.Errorf("ScaleToLoad = %v, %v; want 0, %q", factor, err, tt.want)
			}
			if !slices.Equal(tr.Jobs, before) {
				t.Error("after the error the jobs changed")
			}
		})
	}
}

func readFile(t testing.TB, name string) *Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Read(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The excerpts' numbers were worked out with awk from the CSV files.
func TestReadExcerpts(t *testing.T) {
	for _, tt := range []struct {
		file       string
		first      Job
		last       Job
		span       time.Duration
		gpuSeconds float64
		byGPUs     map[int]int
	}{
		{"itp-cluster05-300.norm.csv",
			Job{ID: "930dd644-e119-8ce9-0935-e6148a7c7bed", GPUs: 1, Fraction: 1, Duration: 16235 * time.Second, Line: 2},
			Job{ID: "2b63b9a4-7d7d-5da3-18f7-3f1bf8b5b16f", Submit: 153319 * time.Second, GPUs: 1, Fraction: 1, Duration: 16448 * time.Second, Line: 301},
			153319 * time.Second, 5301905, map[int]int{1: 296, 8: 4}},
		{"philly-pollux-20171021-7d-300.norm.csv",
			Job{ID: "philly-47183", GPUs: 1, Fraction: 1, Duration: 72 * time.Second, Line: 2},
			Job{ID: "philly-46866", Submit: 32726 * time.Second, GPUs: 1, Fraction: 1, Duration: 2002 * time.Second, Line: 301},
			32726 * time.Second, 15268229, map[int]int{1: 275, 2: 11, 4: 11, 8: 3}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			tr := readFile(t, tt.file)
			if tr.Name != tt.file || len(tr.Jobs) != 300 || len(tr.Warnings) != 0 {
				t.Fatalf("Name %q, %d jobs, warnings %q; want %q, 300, none", tr.Name, len(tr.Jobs), tr.Warnings, tt.file)
			}
			if tr.Jobs[0] != tt.first || tr.Jobs[299] != tt.last {
				t.Errorf("first %+v\nlast %+v\nwant %+v\nand %+v", tr.Jobs[0], tr.Jobs[299], tt.first, tt.last)
			}
			if tr.Span() != tt.span {
				t.Errorf("Span = %v; want %v", tr.Span(), tt.span)
			}
			if got := tr.GPUSeconds(8); got != tt.gpuSeconds {
				t.Errorf("GPUSeconds(8) = %v; want %v", got, tt.gpuSeconds)
			}
			byGPUs := map[int]int{}
			for i, j := range tr.Jobs {
				byGPUs[j.GPUs]++
				if j.User != "" || j.Class != "" || j.Fraction != 1 || j.Duration <= 0 || j.Line != i+2 {
					t.Errorf("job %+v: want no user, no class, fraction 1, a duration, line %d", j, i+2)
				}
			}
			if fmt.Sprint(byGPUs) != fmt.Sprint(tt.byGPUs) {
				t.Errorf("jobs by GPUs = %v; want %v", byGPUs, tt.byGPUs)
			}
			// Scaled to 60% of a 2 × 8-GPU lab.
			if _, err := tr.ScaleToLoad(0.6, 16, 8); err != nil {
				t.Fatal(err)
			}
			if got := tr.Load(16, 8); math.Abs(got-0.6) > 1e-6 {
				t.Errorf("Load after ScaleToLoad(0.6) = %v", got)
			}
		})
	}
}

// The Philly excerpt's raw rows give each job its virtual cluster, as the
// raw file spells it.
func TestUsersFromPhillyExcerpt(t *testing.T) {
	tr := readFile(t, "philly-pollux-20171021-7d-300.norm.csv")
	raw, err := os.ReadFile(filepath.Join("testdata", "philly-pollux-20171021-7d-300.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.UsersFrom("philly-pollux-20171021-7d-300.csv", bytes.NewReader(raw), "cluster"); err != nil {
		t.Fatal(err)
	}
	vcs := map[string]int{}
	for _, j := range tr.Jobs {
		vcs[j.User]++
	}
	want := map[string]int{"103959": 14, "11cb48": 69, "6214e9": 11, "6c71a0": 88, "7f04ca": 3, "b436b2": 93, "ed69ec": 13, "ee9e8c": 9}
	if fmt.Sprint(vcs) != fmt.Sprint(want) {
		t.Errorf("jobs per VC = %v; want %v", vcs, want)
	}
	for _, tt := range []struct {
		i      int
		id, vc string
	}{{0, "philly-47183", "11cb48"}, {1, "philly-47048", "11cb48"}, {299, "philly-46866", "b436b2"}} {
		if j := tr.Jobs[tt.i]; j.ID != tt.id || j.User != tt.vc {
			t.Errorf("job %d: %s of %q; want %s of %q", tt.i, j.ID, j.User, tt.id, tt.vc)
		}
	}
	if tr.UsersMadeUp {
		t.Error("UsersMadeUp = true")
	}
}

func BenchmarkRead(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "itp-cluster05-300.norm.csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		tr, err := Read("itp-cluster05-300.norm.csv", bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if len(tr.Jobs) != 300 {
			b.Fatalf("Read: %d jobs; want 300", len(tr.Jobs))
		}
	}
}
