package job

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Seconds is d as a JSON number of seconds, exact to the nanosecond
// ("5400", "1.5", "0.000000001"): how every duration of gssh's JSON
// documents and state records is written (fields ending _s). A
// strconv float of d.Seconds() would round long durations.
func Seconds(d time.Duration) json.Number {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	s := sign + strconv.FormatInt(int64(d/time.Second), 10)
	if ns := int64(d % time.Second); ns != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%09d", ns), "0")
	}
	return json.Number(s)
}

// SecondsTo is a measured d as a JSON number of seconds, rounded to unit
// (time.Microsecond for SSH and probe times, time.Millisecond for run and
// simulated times): how every measured duration of gssh's JSON is
// written; given ones (a walltime) are Seconds, exact.
// unit divides a second (a decimal fraction of it): the count of units
// over the units in a second is the float nearest the decimal, as JSON
// prints it ("1.235", not Duration.Seconds' "1.2349999999999999").
func SecondsTo(d, unit time.Duration) float64 {
	return float64(d.Round(unit)/unit) / float64(time.Second/unit)
}

// ParseSeconds reads a JSON number of seconds (Seconds' output, or any
// decimal number such as 1e3) as a duration, rounded to the nanosecond;
// "" is 0. It fails on what is not a number or does not fit a
// time.Duration (about 292 years).
func ParseSeconds(n json.Number) (time.Duration, error) {
	if n == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(string(n) + "s"); err == nil {
		return d, nil // plain decimals: exact
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f*1e9 > float64(1<<63-1) || f*1e9 < -float64(1<<63) {
		return 0, fmt.Errorf("%q is not a number of seconds that fits a duration", string(n))
	}
	return time.Duration(f * 1e9), nil
}
