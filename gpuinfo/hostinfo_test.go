package gpuinfo

import (
	"slices"
	"strings"
	"testing"

	"github.com/gssh/gssh/units"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"0-1,4,6-7\n", []int{0, 1, 4, 6, 7}},
		{"5,1-2,2", []int{1, 2, 5}},
	} {
		got, err := ParseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if back := units.Ranges(got, 2); !slices.Equal(mustList(t, back), got) {
			t.Errorf("units.Ranges(%v, 2) = %q does not read back", got, back)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1-", "0,,1", "01", "1 2", "0-70000", "99999999999999999999"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		}
	}
	if got, err := ParseCPUList("0-3,8,10-11"); err != nil || units.Ranges(got, 2) != "0-3,8,10-11" {
		t.Errorf("ParseCPUList(0-3,8,10-11) = %v, %v: does not write back as it was", got, err)
	}
}

func mustList(t *testing.T, s string) []int {
	t.Helper()
	ids, err := ParseCPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestParseHostInfo(t *testing.T) {
	full := []string{
		"MemTotal:       16318012 kB",
		"MemAvailable:    8159006 kB",
		"Cpus_allowed_list:\t0-1,4-5",
		"online: 8",
	}
	h, warns := ParseHostInfo(full)
	if h == nil || len(warns) != 0 {
		t.Fatalf("%+v, warnings %q", h, warns)
	}
	if *h.MemTotal != 16318012*1024 || *h.MemAvailable != 8159006*1024 || *h.CPUs != 4 || !slices.Equal(h.CPUIDs, []int{0, 1, 4, 5}) {
		t.Errorf("got %d %d %d %v", *h.MemTotal, *h.MemAvailable, *h.CPUs, h.CPUIDs)
	}

	// Without Cpus_allowed_list the online count stands, with no ids.
	h, warns = ParseHostInfo([]string{full[0], full[1], "online: 8"})
	if h == nil || h.CPUs == nil || *h.CPUs != 8 || h.CPUIDs != nil || !hasWarning(warns, "CPU ids unknown") {
		t.Errorf("online only: %+v, warnings %q", h, warns)
	}

	// Malformed lines: the fact is nil, never 0, and a warning says which.
	h, warns = ParseHostInfo([]string{"MemTotal: lots kB", "MemAvailable: 5 MB", "Cpus_allowed_list: 3-1", "online: "})
	if h != nil {
		t.Errorf("garbage gave %+v", h)
	}
	h, warns = ParseHostInfo([]string{"MemTotal: 1000 kB", "MemAvailable: 5 MB", "Cpus_allowed_list: 3-1", "online: x"})
	if h == nil || h.MemTotal == nil || *h.MemTotal != 1024000 || h.MemAvailable != nil || h.CPUs != nil || h.CPUIDs != nil {
		t.Fatalf("malformed: %+v", h)
	}
	for _, w := range []string{"MemAvailable \"5 MB\"", "Cpus_allowed_list \"3-1\"", "_NPROCESSORS_ONLN printed \"x\""} {
		if !hasWarning(warns, w) {
			t.Errorf("warnings %q, want one holding %q", warns, w)
		}
	}

	// Available past total is not believed.
	h, warns = ParseHostInfo([]string{"MemTotal: 10 kB", "MemAvailable: 20 kB"})
	if h == nil || h.MemAvailable != nil || !hasWarning(warns, "exceeds MemTotal") || !hasWarning(warns, "CPU count unknown") {
		t.Errorf("avail > total: %+v, %q", h, warns)
	}

	// No /proc at all (not Linux): nil and one warning.
	h, warns = ParseHostInfo([]string{"grep: /proc/meminfo: No such file or directory", "online: "})
	if h != nil || len(warns) != 1 || !strings.Contains(warns[0], "not Linux") {
		t.Errorf("no /proc: %+v, %q", h, warns)
	}
}

func hasWarning(warns []string, part string) bool {
	return slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, part) })
}
