package units

import (
	"fmt"
	"strings"
	"time"
)

// FormatDuration prints d as people write a walltime: Go's form without
// the zero units at its end ("4h", "1h30m", "10m", "90s", "2h0m5s",
// "1.5s"). ParseDuration reads every result back to d.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if m, ok := strings.CutSuffix(s, "m0s"); ok {
		s = m + "m"
		if h, ok := strings.CutSuffix(s, "h0m"); ok {
			s = h + "h"
		}
	}
	return s
}

// FormatElapsed prints an elapsed time to the second in at most two
// units, as a job table shows it: "42s", "1m27s", "2h05m", "3d04h"
// (hours up to 48, then days). It rounds; it is not meant to be read
// back.
func FormatElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours()/24), int(d.Hours())%24)
}
