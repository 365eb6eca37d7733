package sim

import (
	"encoding/json"
	"time"

	"github.com/gssh/gssh/job"
)

// The JSON of a report (gssh sim --json, schema ComparisonSchema) gives
// each time as a number of seconds, to the millisecond, in a field
// ending _s: makespan_s, mean_wait_s, p50_wait_s, p95_wait_s,
// max_wait_s, mean_completion_s (a user's or a size's row: mean_wait_s,
// p95_wait_s, max_wait_s).

type (
	reportFields  Report
	userRowFields UserRow
	sizeRowFields SizeRow
)

// waitsJSON are the waits every row has.
type waitsJSON struct {
	MeanWait float64 `json:"mean_wait_s"`
	P95Wait  float64 `json:"p95_wait_s"`
	MaxWait  float64 `json:"max_wait_s"`
}

func waits(mean, p95, maxW time.Duration) waitsJSON {
	return waitsJSON{secondsMS(mean), secondsMS(p95), secondsMS(maxW)}
}

// MarshalJSON writes r with its times in seconds.
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		reportFields
		Makespan float64 `json:"makespan_s"`
		waitsJSON
		P50Wait        float64 `json:"p50_wait_s"`
		MeanCompletion float64 `json:"mean_completion_s"`
	}{reportFields(r), secondsMS(r.Makespan), waits(r.MeanWait, r.P95Wait, r.MaxWait), secondsMS(r.P50Wait), secondsMS(r.MeanCompletion)})
}

// MarshalJSON writes u with its waits in seconds.
func (u UserRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		userRowFields
		waitsJSON
	}{userRowFields(u), waits(u.MeanWait, u.P95Wait, u.MaxWait)})
}

// MarshalJSON writes z with its waits in seconds.
func (z SizeRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		sizeRowFields
		waitsJSON
	}{sizeRowFields(z), waits(z.MeanWait, z.P95Wait, z.MaxWait)})
}

// secondsMS is d in seconds, rounded to the millisecond.
func secondsMS(d time.Duration) float64 { return job.SecondsTo(d, time.Millisecond) }
