//go:build !gssh_testclock

package main

import "time"

// clockOf is gssh's clock: the machine's, always. The test build
// (-tags gssh_testclock, testclock.go) can shift it; this one has no
// hidden clock.
func clockOf(map[string]string) (func() time.Time, error) { return time.Now, nil }

// testClockBuilt says whether this build honours a test clock: it does not.
const testClockBuilt = false
