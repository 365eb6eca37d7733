package state

import "testing"

// SetTrimBatches makes Trim's transactions take at most batch records,
// at most batches of them per call, for the test.
func SetTrimBatches(t *testing.T, batch, batches int) {
	t.Cleanup(func() { trimBatch, maxTrimBatches = TrimBatch, MaxTrimBatches })
	trimBatch, maxTrimBatches = batch, batches
}
