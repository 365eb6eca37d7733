package units

import "testing"

func TestRanges(t *testing.T) {
	for _, tt := range []struct {
		in     []int
		minRun int
		want   string
	}{
		{nil, 2, ""},
		{[]int{}, 3, ""},
		{[]int{4}, 2, "4"},
		{[]int{4}, 3, "4"},
		{[]int{0, 1, 2, 3, 7, 9, 10}, 2, "0-3,7,9-10"},
		{[]int{0, 1, 2, 3, 7, 9, 10}, 3, "0-3,7,9,10"},
		{[]int{0, 1, 2, 3, 5, 6}, 3, "0-3,5,6"},
		{[]int{0, 1, 2, 5, 6, 7, 8}, 4, "0,1,2,5-8"},
		{[]int{0, 1}, 0, "0-1"}, // below 2 is 2
		{[]int{0, 2, 4}, 2, "0,2,4"},
		{[]int{-3, -2, -1, 0}, 2, "-3-0"},
		{[]int{9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 3, "9-20"},
	} {
		if got := Ranges(tt.in, tt.minRun); got != tt.want {
			t.Errorf("Ranges(%v, %d) = %q, want %q", tt.in, tt.minRun, got, tt.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{-1: "jobs", 0: "jobs", 1: "job", 2: "jobs", 100: "jobs"} {
		if got := Plural(n, "job", "jobs"); got != want {
			t.Errorf("Plural(%d, job, jobs) = %q, want %q", n, got, want)
		}
	}
	if got := Plural(3, "entry", "entries"); got != "entries" {
		t.Errorf("Plural(3, entry, entries) = %q", got)
	}
}

func TestRuns(t *testing.T) {
	type run struct{ first, last uint64 }
	var got []run
	for first, last := range Runs([]uint64{0, 1, 2, 5, 5, 7, 8, 1<<64 - 1}) {
		got = append(got, run{first, last})
	}
	want := []run{{0, 2}, {5, 5}, {5, 5}, {7, 8}, {1<<64 - 1, 1<<64 - 1}}
	if len(got) != len(want) {
		t.Fatalf("Runs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Runs = %v, want %v", got, want)
			break
		}
	}
	for range Runs([]int{1, 2, 4}) {
		break // stopping early must not panic
	}
}
