package units

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseWalltime(t *testing.T) {
	const day = 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		// Go durations.
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"45s", 45 * time.Second},
		{"1s", time.Second},
		{"1.5s", 1500 * time.Millisecond},
		{"48h", 2 * day},
		// Slurm: minutes, minutes:seconds, hours:minutes:seconds.
		{"90", 90 * time.Minute},
		{"0090", 90 * time.Minute},
		{"5:30", 5*time.Minute + 30*time.Second},
		{"0:30", 30 * time.Second},
		{"90:00", 90 * time.Minute}, // the leading field is not bounded
		{"1:30:00", 90 * time.Minute},
		{"01:30:00", 90 * time.Minute},
		{"00:00:01", time.Second},
		{"100:00:00", 100 * time.Hour},
		// Slurm: days-hours, days-hours:minutes, days-hours:minutes:seconds.
		{"2-00", 2 * day},
		{"2-12", 2*day + 12*time.Hour},
		{"1-2:30", day + 2*time.Hour + 30*time.Minute},
		{"1-02:03:04", day + 2*time.Hour + 3*time.Minute + 4*time.Second},
		{"0-00:00:01", time.Second},
		{"106751-23:47:16", 106751*day + 23*time.Hour + 47*time.Minute + 16*time.Second}, // the longest in whole seconds
	} {
		got, err := ParseWalltime(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseWalltime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseWalltimeErrors(t *testing.T) {
	for _, tt := range []struct{ in, why string }{
		{"", "empty walltime"},
		{" 1h", "remove the spaces"},
		{"1 h", "remove the spaces"},
		{"1:00 ", "remove the spaces"},
		{"0", "must be more than 0"},
		{"00:00", "must be more than 0"},
		{"0-0", "must be more than 0"},
		{"0s", "must be more than 0"},
		{"0.0h", "must be more than 0"},
		{"-1", "must be more than 0"},
		{"-1h", "must be more than 0"},
		{"-", "must be more than 0"},
		{"unlimited", "leave --timeout out"},
		{"INFINITE", "leave --timeout out"},
		{"1:60:00", "minutes must be below 60"},
		{"1:00:60", "seconds must be below 60"},
		{"5:60", "seconds must be below 60"},
		{"1-24", "hours must be below 24"},
		{"1-0:60", "minutes must be below 60"},
		{"1-", "hours must be a number"},
		{"1--2", "hours must be a number"},
		{"1-2-3", "hours must be a number"},
		{"1:", "seconds must be a number"},
		{":30", "minutes must be a number"},
		{"1::2", "minutes must be a number"},
		{"1:2:3:4", "too many fields"},
		{"1-1:1:1:1", "too many fields"},
		{"99999999999999999999", "too large"},
		{"153722867281", "too large"}, // minutes: beyond time.Duration
		{"106751-23:47:17", "too large"},
		{"2d", "not a duration"},
		{"1h30", "not a duration"},
		{"abc", "not a duration"},
		{"1e3s", "not a duration"},
		{"9999999999h", "not a duration"},
		{"1ns", "1ns is below 1s, the shortest walltime; give 1s or more"},
		{"500ms", "500ms is below 1s"},
		{"999ms", "999ms is below 1s"},
	} {
		_, err := ParseWalltime(tt.in)
		if err == nil {
			t.Errorf("ParseWalltime(%q): no error, want %q", tt.in, tt.why)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.why) || !strings.Contains(msg, walltimeHelp) {
			t.Errorf("ParseWalltime(%q) error %q, want it to say %q and give examples", tt.in, msg, tt.why)
		}
	}
}

// slurmTime prints d (whole seconds) as D-HH:MM:SS.
func slurmTime(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("%d-%02d:%02d:%02d", s/86400, s/3600%24, s/60%60, s%60)
}

func FuzzParseWalltime(f *testing.F) {
	for _, s := range []string{"90m", "1h30m", "90", "5:30", "1:30:00", "2-12", "1-2:30", "1-02:03:04", "0", "-1", "1:60:00", "2d", "106751-23:47:17", "1e3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseWalltime(s)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid walltime ") && !strings.HasPrefix(msg, "empty walltime") {
				t.Fatalf("ParseWalltime(%q): error %q does not say what it is about", s, msg)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("ParseWalltime(%q) = %v: not positive", s, d)
		}
		if e, err := ParseWalltime(d.String()); err != nil || e != d {
			t.Fatalf("ParseWalltime(%q) = %v, %v; want %v", d.String(), e, err, d)
		}
		if d%time.Second == 0 {
			if e, err := ParseWalltime(slurmTime(d)); err != nil || e != d {
				t.Fatalf("ParseWalltime(%q) = %v, %v; want %v", slurmTime(d), e, err, d)
			}
		}
	})
}
