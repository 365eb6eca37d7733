package units

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{4 * time.Hour: "4h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s",
		2*time.Hour + 5*time.Second: "2h0m5s", 45 * time.Second: "45s", 10 * time.Minute: "10m", 1500 * time.Millisecond: "1.5s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%s)) = %v, %v", d, back, err)
		}
	}
}

func TestFormatElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 42 * time.Second: "42s", 87 * time.Second: "1m27s",
		125 * time.Minute: "2h05m", 47*time.Hour + 59*time.Minute: "47h59m", 76 * time.Hour: "3d04h", 1499 * time.Millisecond: "1s"} {
		if got := FormatElapsed(d); got != want {
			t.Errorf("FormatElapsed(%s) = %q, want %q", d, got, want)
		}
	}
}
