package sched

import (
	"strings"
	"testing"
	"time"
)

func TestParseBegin(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, loc)
	at := func(d, h, m, s int) time.Time { return time.Date(2026, 12, d, h, m, s, 0, loc) }
	for in, want := range map[string]time.Time{
		"now":                       now,
		"now+90":                    now.Add(90 * time.Second),
		"now+2h":                    now.Add(2 * time.Hour),
		"NOW+3days":                 now.Add(72 * time.Hour),
		"now+1week":                 now.Add(7 * 24 * time.Hour),
		"16:00":                     at(1, 16, 0, 0),
		"14:00":                     at(2, 14, 0, 0), // passed today: tomorrow
		"15:30":                     at(2, 15, 30, 0),
		"09:05:07":                  at(2, 9, 5, 7),
		"2026-12-24":                at(24, 0, 0, 0),
		"2026-12-24T09:00":          at(24, 9, 0, 0),
		"2026-12-24 09:00:30":       at(24, 9, 0, 30),
		"2026-11-01":                time.Date(2026, 11, 1, 0, 0, 0, 0, loc), // past: the caller warns
		"midnight":                  at(2, 0, 0, 0),
		"noon":                      at(2, 12, 0, 0),
		"today":                     at(1, 0, 0, 0),
		"tomorrow":                  at(2, 0, 0, 0),
		"+2h":                       now.Add(2 * time.Hour),
		"tomorrow 08:00":            at(2, 8, 0, 0),
		"Today  16:15":              at(1, 16, 15, 0),
		"today 09:00":               at(1, 9, 0, 0), // past: the caller decides
		"2026-12-02T08:00:00Z":      time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		"2026-12-02T08:00:00+01:00": at(2, 8, 0, 0),
	} {
		got, err := ParseBegin(in, now, loc)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseBegin(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                "--begin is empty",
		"soon":            `--begin "soon": not a time`,
		"now+":            "now+ needs a whole number",
		"now+-1h":         "now+ needs a whole number",
		"now+2fortnights": `unknown unit "fortnights"`,
		"now+999999999w":  "too far ahead",
		"25:00":           "not a time",
		"2026-13-01":      "not a time",
		"tomorrow 25:00":  "not a time",
		"+":               "now+ needs a whole number",
	} {
		if _, err := ParseBegin(in, now, loc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBegin(%q): %v, want %q", in, err, want)
		}
	}
}

// ParseTime names the flag it reads for in its errors.
func TestParseTimeFlag(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	if _, err := ParseTime("--at", "soon", now, time.UTC); err == nil || !strings.HasPrefix(err.Error(), `--at "soon": not a time: give now+2h`) {
		t.Errorf("ParseTime: %v", err)
	}
}
