package sched

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxArrayTasks is the most tasks one job array may have.
const MaxArrayTasks = 10000

// MaxArrayIndex is the largest task index.
const MaxArrayIndex = 1_000_000

// ParseArray reads --array as sbatch does: comma-separated indexes and
// ranges, "0-31", "1,4,9", "0-99:2" (a step), with an optional "%N" at the
// end (at most N tasks running at once). It returns the indexes in the
// order given and N (0: no limit); an index given twice (1,1; 0-9,5) is
// an error, as a task would otherwise be silently dropped. Indexes go from 0 to
// MaxArrayIndex; at most MaxArrayTasks of them. Errors say what part is
// wrong and what to give.
func ParseArray(s string) (indexes []int, limit int, err error) {
	const help = "give indexes and ranges such as 0-31, 1,4,9 or 0-99:2, with %N to run at most N at once"
	spec, lim, hasLimit := strings.Cut(strings.TrimSpace(s), "%")
	if hasLimit {
		n, err := strconv.Atoi(lim)
		if err != nil || n < 1 {
			return nil, 0, fmt.Errorf("--array %q: %%%s: give %%N with N a whole number from 1 (%%4: at most 4 tasks at once)", s, lim)
		}
		limit = n
	}
	if spec == "" {
		return nil, 0, fmt.Errorf("--array %q: no indexes: %s", s, help)
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(spec, ",") {
		bad := func(why string) ([]int, int, error) {
			return nil, 0, fmt.Errorf("--array %q: %q: %s; %s", s, part, why, help)
		}
		rng, stepText, hasStep := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first, err1 := index(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = index(hi)
		}
		step := 1
		switch {
		case err1 != nil:
			return bad(err1.Error())
		case err2 != nil:
			return bad(err2.Error())
		case hasStep && !isRange:
			return bad("a step needs a range (0-99:2)")
		case last < first:
			return bad(fmt.Sprintf("an empty range (%d is after %d)", first, last))
		}
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return bad("the step " + strconv.Quote(stepText) + " is not a whole number from 1")
			}
			step = n
		}
		for i := first; i <= last; i += step {
			if seen[i] {
				return nil, 0, fmt.Errorf("--array %q: index %d is given twice: give each index once (1,4,9; 0-31; 0-99:2)", s, i)
			}
			if len(indexes) == MaxArrayTasks {
				return nil, 0, fmt.Errorf("--array %q: more than %d tasks: split the sweep, or give a step", s, MaxArrayTasks)
			}
			seen[i] = true
			indexes = append(indexes, i)
		}
	}
	return indexes, limit, nil
}

func index(s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a task index", s)
	case n < 0 || n > MaxArrayIndex:
		return 0, fmt.Errorf("%d is not a task index from 0 to %d", n, MaxArrayIndex)
	}
	return n, nil
}
