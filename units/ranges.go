package units

import (
	"strconv"
	"strings"
)

// Ranges writes ascending ints as a comma-separated list in which each
// run of at least minRun consecutive ints is written first-last, and a
// shorter run int by int. With minRun 2 it writes a Linux CPU list, the
// form taskset reads and squeue gives array tasks in: [0 1 2 3 7 9 10] →
// "0-3,7,9-10". With minRun 3, as pending reasons name GPUs, a pair stays
// two ints: "0-3,7,9,10". A minRun below 2 is 2 (a lone int is never a
// run). Nil or empty xs is "".
func Ranges(xs []int, minRun int) string {
	minRun = max(minRun, 2)
	var b strings.Builder
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j-i+1 >= minRun {
			b.WriteString(strconv.Itoa(xs[i]))
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(xs[j]))
		} else {
			for k := i; k <= j; k++ {
				if k > i {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(xs[k]))
			}
		}
		i = j + 1
	}
	return b.String()
}
