//go:build !race

package state_test

// raceBuild: the race detector is on (go test -race): tests that
// repeat an operation many times repeat it fewer.
const raceBuild = false
