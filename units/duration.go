package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// walltimeHelp ends every ParseWalltime error: what a valid walltime looks like.
const walltimeHelp = "use a Go duration (90m, 1h30m) or Slurm's [D-]HH:MM:SS (like 2-00:00:00, 1:30:00 or 90 for minutes)"

// ParseDuration reads a duration in a walltime's forms: a Go duration
// ("90m", "1h30m", "1.5h") or one of Slurm's forms, all digits: "MM",
// "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM" and "D-HH:MM:SS" (a bare number
// is minutes, as in Slurm). A field after another must be in range
// (minutes and seconds below 60, hours after days below 24). The result is
// more than 0: zero, negatives and Slurm's "unlimited" are errors. The
// caller sets its own least value (the policy's settings, ages).
func ParseDuration(s string) (time.Duration, error) {
	return parseDuration(s, 0)
}

// ParseWalltime reads a job's walltime (--timeout, the policy's
// default_timeout) as ParseDuration does, and is at least 1s: anything
// shorter (1ns: no job starts in that) is an error too.
func ParseWalltime(s string) (time.Duration, error) {
	return parseDuration(s, time.Second)
}

// parseDuration is ParseDuration with a least value (0: none).
func parseDuration(s string, least time.Duration) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("invalid walltime %q: %s; %s", s, why, walltimeHelp)
	}
	switch {
	case s == "":
		return 0, errors.New("empty walltime: " + walltimeHelp)
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return bad("remove the spaces")
	case s[0] == '-' || strings.EqualFold(s, "unlimited") || strings.EqualFold(s, "infinite"):
		return bad("must be more than 0 (leave --timeout out for no limit, or the policy's default_timeout)")
	}
	var (
		d   time.Duration
		err error
	)
	if strings.Trim(s, "0123456789:-") == "" {
		d, err = parseSlurmTime(s)
		if err != nil {
			return bad(err.Error())
		}
	} else {
		d, err = time.ParseDuration(s)
		if err != nil {
			return bad("not a duration")
		}
	}
	switch {
	case d <= 0:
		return bad("must be more than 0")
	case d < least:
		return bad(fmt.Sprintf("%s is below %s, the shortest walltime; give %s or more, such as 90s", d, least, least))
	}
	return d, nil
}

// slurmField is one field of Slurm's time forms.
type slurmField struct {
	name string
	secs uint64 // seconds in one unit
	max  uint64 // the value must be below max when a larger field precedes it
}

var (
	days    = slurmField{"days", 86400, 0}
	hours   = slurmField{"hours", 3600, 24}
	minutes = slurmField{"minutes", 60, 60}
	seconds = slurmField{"seconds", 1, 60}
)

// maxSecs is the longest time.Duration in whole seconds.
const maxSecs = math.MaxInt64 / uint64(time.Second)

// parseSlurmTime reads Slurm's [D-]HH:MM:SS family; s holds only digits,
// ':' and '-'. Errors are the reason alone, for ParseWalltime to wrap.
func parseSlurmTime(s string) (time.Duration, error) {
	var nums []string
	var fields []slurmField
	if d, rest, dashed := strings.Cut(s, "-"); dashed {
		nums = append([]string{d}, strings.Split(rest, ":")...)
		fields = []slurmField{days, hours, minutes, seconds}
	} else {
		nums = strings.Split(s, ":")
		fields = map[int][]slurmField{
			1: {minutes},
			2: {minutes, seconds},
			3: {hours, minutes, seconds},
		}[len(nums)]
	}
	if len(nums) > len(fields) {
		return 0, errors.New("too many fields")
	}
	var secs uint64
	for i, f := range nums {
		field := fields[i]
		if f == "" || strings.Trim(f, "0123456789") != "" {
			return 0, fmt.Errorf("%s must be a number", field.name)
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil || n > maxSecs/field.secs || secs+n*field.secs > maxSecs {
			return 0, errors.New("too large")
		}
		if i > 0 && n >= field.max {
			return 0, fmt.Errorf("%s must be below %d", field.name, field.max)
		}
		secs += n * field.secs
	}
	return time.Duration(secs) * time.Second, nil
}
