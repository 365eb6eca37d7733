//go:build gssh_testclock

package main

import (
	"fmt"
	"time"
)

// testClockEnv names the shift of the test build's clock: a Go duration
// ("17h29m58.5s", "-2h") added to the machine's time, so that the CLI
// scripts can run at any time of day (cli_test.go sets it from
// $GSSH_TEST_NOW). Only a binary built with -tags gssh_testclock reads it.
const testClockEnv = "GSSH_TEST_CLOCK"

// testClockBuilt says this build honours testClockEnv.
const testClockBuilt = true

// clockOf is gssh's clock: the machine's time shifted by
// $GSSH_TEST_CLOCK, or the machine's when it is empty. The time still
// passes at the machine's rate; only the controller is shifted (the
// workers' shells keep the real time, as a skewed worker would).
func clockOf(env map[string]string) (func() time.Time, error) {
	s := env[testClockEnv]
	if s == "" {
		return time.Now, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("$%s %q: give a duration to shift the clock by, such as 17h30m or -2h: %w", testClockEnv, s, err)
	}
	return func() time.Time { return time.Now().Add(d) }, nil
}
