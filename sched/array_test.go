package sched

import (
	"slices"
	"strings"
	"testing"
)

func TestParseArray(t *testing.T) {
	for in, want := range map[string]struct {
		idx   []int
		limit int
	}{
		"0-3":       {[]int{0, 1, 2, 3}, 0},
		"1,4,9":     {[]int{1, 4, 9}, 0},
		"0-9:3":     {[]int{0, 3, 6, 9}, 0},
		"0-7%2":     {[]int{0, 1, 2, 3, 4, 5, 6, 7}, 2},
		"5":         {[]int{5}, 0},
		"3,1-2":     {[]int{3, 1, 2}, 0},
		" 0-1 ":     {[]int{0, 1}, 0},
		"0-9999":    {nil, 0}, // 10,000: the most
		"7-7:5%100": {[]int{7}, 100},
	} {
		idx, limit, err := ParseArray(in)
		if err != nil || limit != want.limit || want.idx != nil && !slices.Equal(idx, want.idx) {
			t.Errorf("ParseArray(%q) = %v %d %v", in, idx, limit, err)
		}
	}
	if idx, _, _ := ParseArray("0-9999"); len(idx) != MaxArrayTasks {
		t.Errorf("0-9999: %d tasks", len(idx))
	}
	for in, want := range map[string]string{
		"":        "no indexes",
		"%4":      "no indexes",
		"5-3":     "an empty range (5 is after 3)",
		"0-9:0":   `the step "0" is not a whole number from 1`,
		"3:2":     "a step needs a range",
		"a-b":     `"a" is not a task index`,
		"0-10000": "more than 10000 tasks",
		"0-9%0":   "%0: give %N",
		"0-9%x":   "%x: give %N",
		"-1":      `"" is not a task index`,
		"2000000": "2000000 is not a task index from 0 to 1000000",
		"1,,2":    `"" is not a task index`,
		"1,1,1":   `index 1 is given twice: give each index once`,
		"3,1-2,3": "index 3 is given twice",
		"0-9,5-7": "index 5 is given twice",
		"0-9:2,4": "index 4 is given twice",
	} {
		if _, _, err := ParseArray(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseArray(%q): %v, want %q", in, err, want)
		}
	}
}
