package sched

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseBegin reads a --begin time as sbatch does (see ParseTime).
func ParseBegin(s string, now time.Time, loc *time.Location) (time.Time, error) {
	return ParseTime("--begin", s, now, loc)
}

// ParseTime reads the time given to flag (--begin, --at) the way Slurm's
// sbatch --begin and scontrol's StartTime read one, in loc (the user's
// time zone), now being the time of the command:
//
//	now, now+N[unit], +N[unit]  unit s (the default), m/min, h/hour, d/day, w/week (plurals too)
//	HH:MM[:SS]                  today at that time, or tomorrow if it has passed
//	YYYY-MM-DD[THH:MM[:SS]]     that day (at midnight without a time); a space may stand for the T
//	today HH:MM, tomorrow HH:MM that day at that time
//	RFC 3339                    2026-12-02T08:00:00Z, 2026-12-02T08:00:00+01:00
//	midnight, noon, today, tomorrow
//
// A time in the past is not an error here: the caller decides (--begin
// warns, --at refuses).
func ParseTime(flag, s string, now time.Time, loc *time.Location) (time.Time, error) {
	help := "give now+2h, 14:00, tomorrow 08:00, 2026-12-24 or 2026-12-24T09:00"
	in := strings.Join(strings.Fields(strings.ToLower(s)), " ")
	now = now.In(loc)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	switch in {
	case "":
		return time.Time{}, fmt.Errorf("%s is empty: %s", flag, help)
	case "now":
		return now, nil
	case "today":
		return day, nil
	case "tomorrow", "midnight":
		return day.AddDate(0, 0, 1), nil
	case "noon":
		if t := day.Add(12 * time.Hour); t.After(now) {
			return t, nil
		}
		return day.AddDate(0, 0, 1).Add(12 * time.Hour), nil
	}
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(s)); err == nil {
		return t.In(loc), nil
	}
	rest, ok := strings.CutPrefix(in, "now+")
	if !ok {
		rest, ok = strings.CutPrefix(in, "+")
	}
	if ok {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n > 1e9 {
			return time.Time{}, fmt.Errorf("%s %q: now+ needs a whole number, such as now+90 (seconds) or now+2hours", flag, s)
		}
		unit := map[string]time.Duration{"": time.Second, "s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
			"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
			"h": time.Hour, "hour": time.Hour, "hours": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
			"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour}
		u, ok := unit[rest[i:]]
		if !ok {
			return time.Time{}, fmt.Errorf("%s %q: unknown unit %q: give s, m, h, d or w (now+2h)", flag, s, rest[i:])
		}
		if time.Duration(n) > (1<<62)/u {
			return time.Time{}, fmt.Errorf("%s %q: too far ahead", flag, s)
		}
		return now.Add(time.Duration(n) * u), nil
	}
	for prefix, d := range map[string]time.Time{"today ": day, "tomorrow ": day.AddDate(0, 0, 1)} {
		if clock, ok := strings.CutPrefix(in, prefix); ok {
			for _, layout := range []string{"15:04", "15:04:05"} {
				if t, err := time.ParseInLocation(layout, clock, loc); err == nil {
					return time.Date(d.Year(), d.Month(), d.Day(), t.Hour(), t.Minute(), t.Second(), 0, loc), nil
				}
			}
		}
	}
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.ParseInLocation(layout, in, loc); err == nil {
			at := time.Date(now.Year(), now.Month(), now.Day(), t.Hour(), t.Minute(), t.Second(), 0, loc)
			if !at.After(now) {
				at = at.AddDate(0, 0, 1)
			}
			return at, nil
		}
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02t15:04", "2006-01-02t15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, in, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: not a time: %s", flag, s, help)
}
