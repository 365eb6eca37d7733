//go:build gssh_test

package main

import (
	"fmt"
	"time"

	"github.com/gssh/gssh/inventory"
)

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

// systemInventoryOf is $GSSH_TEST_SYSTEM_INVENTORY when it is set, else
// inventory.SystemPath.
func systemInventoryOf(env map[string]string) string {
	if p, ok := env[testInventoryEnv]; ok {
		return p
	}
	return inventory.SystemPath
}
