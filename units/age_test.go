package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	const day = 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"90d": 90 * day, "2w": 14 * day, "1.5d": 36 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute,
		"14-00:00:00": 14 * day, "90": 90 * time.Minute, "1s": time.Second,
	} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "-3d", "d", "3x", "1e9w", "1.2.3d", "soon", "3 d"} {
		if got, err := ParseAge(in); err == nil || !strings.Contains(err.Error(), "give days or weeks") && !strings.Contains(err.Error(), "too large") {
			t.Errorf("ParseAge(%q) = %v, %v; want an error", in, got, err)
		}
	}
	for d, want := range map[time.Duration]string{90 * day: "90d", 36 * time.Hour: "36h", time.Second: "1s", 90 * time.Minute: "1h30m", 45 * time.Minute: "45m", 1500 * time.Millisecond: "1.5s", 61 * time.Minute: "1h1m"} {
		if got := FormatAge(d); got != want {
			t.Errorf("FormatAge(%v) = %q, want %q", d, got, want)
		}
		if back, err := ParseAge(FormatAge(d)); err != nil || back != d {
			t.Errorf("ParseAge(FormatAge(%v)) = %v %v", d, back, err)
		}
	}
}
