package job

import (
	"encoding/json"
	"fmt"
	"time"
)

// The JSON of a job record (the state file's jobs/ and history/, gssh
// show --json and ps --json, a worker's spec.json) writes each duration
// as a number of seconds in a field ending _s (Seconds): Spec.Timeout as
// timeout_s, Spec.SignalGrace as signal_grace_s, CancelRequest.Grace as
// grace_s. Records written before state schema 6 have them in
// nanoseconds under timeout, signal_grace and grace_ns: those are read
// too (a read of a file not migrated yet, a record in history/ never
// rewritten), the _s field winning where both are present.

// specFields is Spec without its methods, for its (un)marshalling.
type specFields Spec

// MarshalJSON writes s with its durations in seconds (timeout_s,
// signal_grace_s; left out when 0).
func (s Spec) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		specFields
		TimeoutS     json.Number `json:"timeout_s,omitempty"`
		SignalGraceS json.Number `json:"signal_grace_s,omitempty"`
	}{specFields(s), secondsOrEmpty(s.Timeout), secondsOrEmpty(s.SignalGrace)})
}

// UnmarshalJSON reads what MarshalJSON writes, and a record of before
// schema 6 (timeout and signal_grace in nanoseconds).
func (s *Spec) UnmarshalJSON(b []byte) error {
	w := struct {
		*specFields
		TimeoutS     json.Number `json:"timeout_s"`
		SignalGraceS json.Number `json:"signal_grace_s"`
		OldTimeout   int64       `json:"timeout"`      // before schema 6: nanoseconds
		OldGrace     int64       `json:"signal_grace"` // before schema 6: nanoseconds
	}{specFields: (*specFields)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if s.Timeout, err = durationField("timeout_s", w.TimeoutS, w.OldTimeout); err != nil {
		return err
	}
	s.SignalGrace, err = durationField("signal_grace_s", w.SignalGraceS, w.OldGrace)
	return err
}

// cancelFields is CancelRequest without its methods.
type cancelFields CancelRequest

// MarshalJSON writes c with its grace in seconds (grace_s).
func (c CancelRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		cancelFields
		GraceS json.Number `json:"grace_s"`
	}{cancelFields(c), Seconds(c.Grace)})
}

// UnmarshalJSON reads what MarshalJSON writes, and a record of before
// schema 6 (grace_ns, nanoseconds).
func (c *CancelRequest) UnmarshalJSON(b []byte) error {
	w := struct {
		*cancelFields
		GraceS  json.Number `json:"grace_s"`
		GraceNS int64       `json:"grace_ns"` // before schema 6
	}{cancelFields: (*cancelFields)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	c.Grace, err = durationField("grace_s", w.GraceS, w.GraceNS)
	return err
}

// durationField is the duration of a field in seconds (s), or, when it
// is absent, of its field of before schema 6 in nanoseconds (ns).
func durationField(name string, s json.Number, ns int64) (time.Duration, error) {
	if s == "" {
		return time.Duration(ns), nil
	}
	d, err := ParseSeconds(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// secondsOrEmpty is Seconds(d), or "" (left out) for 0.
func secondsOrEmpty(d time.Duration) json.Number {
	if d == 0 {
		return ""
	}
	return Seconds(d)
}
