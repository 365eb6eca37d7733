package jobform

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gssh/gssh/units"
)

// Mem reads a size given as name (--mem, --host-mem; "mem" in JSON):
// bytes, 0 when v is empty; a bare number below 256 MiB is taken as
// MiB, as Slurm does, with a warning that it may have meant GiB.
// Errors name name, and what leaving it out means.
func Mem(name, v string, warn func(string)) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	m, err := units.ParseMem(v)
	if err != nil {
		if hint := leaveOut(name); hint != "" && strings.Contains(err.Error(), "must be more than 0") {
			return 0, fmt.Errorf("%s: %w (%s)", name, err, hint)
		}
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if m < 256*units.MiB && strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		warn(fmt.Sprintf("%s %s means %s (a bare number is MiB, as in Slurm); did you mean %sG?", name, v, units.FormatMem(m), v))
	}
	return m, nil
}

// leaveOut says what leaving the size name out means, for its errors.
func leaveOut(name string) string {
	switch strings.TrimLeft(name, "-") {
	case "mem":
		return "leave " + name + " out to take whole GPUs"
	case "host-mem", "host_mem":
		return "leave " + name + " out to book no host memory"
	}
	return ""
}

// LogLimit reads a log's cap given as name (--log-limit): bytes, 0 when
// v is empty, else a size as Mem reads it (a bare number is MiB) but to
// the byte (units.ParseBytes).
func LogLimit(name, v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := units.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w (leave %s out for no cap)", name, err, name)
	}
	return n, nil
}

// CPUs reads a number of host CPUs given as name (--cpus): 0 when v is
// empty, else a whole number from 1.
func CPUs(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strings.Trim(v, "0123456789") != "" {
		return 0, fmt.Errorf("%s %q: give a whole number of CPUs, 1 or more (leave %s out to book none)", name, v, name)
	}
	return n, nil
}
