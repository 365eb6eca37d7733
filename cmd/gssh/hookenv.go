package main

// The environment of the test build's hooks (testhooks.go, -tags
// gssh_test). The operator's build (hooks.go) reads neither variable;
// the names are here, in both builds, for the tests that set them.

// testClockEnv names the shift of the test build's clock: a Go duration
// ("17h29m58.5s", "-2h") added to the machine's time, so that the CLI
// scripts can run at any time of day (cli_test.go sets it from
// $GSSH_TEST_NOW). Only a binary built with -tags gssh_test reads it.
const testClockEnv = "GSSH_TEST_CLOCK"

// testInventoryEnv names the test build's machine-wide inventory: the
// file gssh reads in place of inventory.SystemPath (a lab's, or a
// personal fallback), so that no test reads the machine's
// /etc/gssh/hosts.yaml. Set and empty: none. Only a binary built with
// -tags gssh_test reads it.
const testInventoryEnv = "GSSH_TEST_SYSTEM_INVENTORY"
