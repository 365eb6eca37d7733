package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// AgeHelp ends every ParseAge error: what a valid age looks like.
const AgeHelp = "give days or weeks (90d, 2w, 1.5d), a Go duration (36h, 90m) or Slurm's [D-]HH:MM:SS (14-00:00:00; a bare number is minutes)"

// ParseAge reads how long something is kept, or how far back to look
// (the inventory's keep_jobs and keep_job_dirs, gssh ps --since): a
// number of days or weeks ("90d", "2w", "1.5d"), or anything
// ParseWalltime reads ("36h", "90m", "14-00:00:00", a bare number of
// minutes). The result is more than 0.
func ParseAge(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		n, ok := strings.CutSuffix(s, suffix)
		if !ok || n == "" || strings.Trim(n, "0123456789.") != "" {
			continue
		}
		f, err := strconv.ParseFloat(n, 64)
		switch {
		case err != nil:
			return 0, fmt.Errorf("invalid age %q: %s", s, AgeHelp)
		case !(f > 0):
			return 0, fmt.Errorf("invalid age %q: must be more than 0; %s", s, AgeHelp)
		case f*float64(unit) >= math.MaxInt64:
			return 0, fmt.Errorf("invalid age %q: too large", s)
		}
		return time.Duration(f * float64(unit)), nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid age %q: %s", s, AgeHelp)
	}
	return d, nil
}

// FormatAge prints an age as ParseAge reads it: whole days or hours as
// such ("90d", "36h"), else as Go does without its zero minutes and
// seconds ("90s", "1h30m", "45m", "1.5s").
func FormatAge(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return FormatDuration(d)
}
