//go:build !gssh_test

package main

import (
	"time"

	"github.com/gssh/gssh/inventory"
)

// clockOf is gssh's clock: the machine's, always. The test build
// (-tags gssh_test, testhooks.go) can shift it; this one has no hidden
// clock.
func clockOf(map[string]string) (func() time.Time, error) { return time.Now, nil }

// testClockBuilt says whether this build honours a test clock: it does not.
const testClockBuilt = false

// systemInventoryOf is the machine-wide inventory: inventory.SystemPath,
// always. The test build can move it.
func systemInventoryOf(map[string]string) string { return inventory.SystemPath }
