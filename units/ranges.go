package units

import (
	"iter"
	"strconv"
	"strings"
)

// Integer is what Runs groups: any integer type (an index, a job id).
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Runs yields the runs of consecutive values in ascending xs, each as its
// first and last value: [0 1 2 5 7 8] → (0, 2), (5, 5), (7, 8). A value
// repeated starts a run of its own. Ranges writes the runs as a list;
// a caller with its own form (a separator, a cap on the runs written)
// ranges over them.
func Runs[T Integer](xs []T) iter.Seq2[T, T] {
	return func(yield func(first, last T) bool) {
		for i := 0; i < len(xs); {
			j := i
			for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
				j++
			}
			if !yield(xs[i], xs[j]) {
				return
			}
			i = j + 1
		}
	}
}

// Ranges writes ascending ints as a comma-separated list in which each
// run (Runs) of at least minRun consecutive ints is written first-last,
// and a shorter run int by int. With minRun 2 it writes a Linux CPU list,
// the form taskset reads and squeue gives array tasks in: [0 1 2 3 7 9
// 10] → "0-3,7,9-10". With minRun 3, as pending reasons name GPUs, a pair
// stays two ints: "0-3,7,9,10". A minRun below 2 is 2 (a lone int is
// never a run). Nil or empty xs is "".
func Ranges(xs []int, minRun int) string {
	minRun = max(minRun, 2)
	var b strings.Builder
	for first, last := range Runs(xs) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if last-first+1 >= minRun {
			b.WriteString(strconv.Itoa(first))
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(last))
			continue
		}
		for v := first; v <= last; v++ {
			if v > first {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(v))
		}
	}
	return b.String()
}
