package service_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

// One job record that cannot be decoded hides that job alone: gssh gpus
// still shows the other jobs holding GPUs, and says which record it
// could not read.
func TestGPUsBadRecord(t *testing.T) {
	l := newLab(t, false)
	var ids []job.ID
	for range 2 {
		s := spec("sleep", "30")
		s.MemPerGPU = 1 << 30 // both on the one free GPU
		res := l.submit(t, s)
		if res.Job.State != job.Running {
			t.Fatalf("job %d: %s (%s)", res.Job.ID, res.Job.State, res.Job.Reason)
		}
		ids = append(ids, res.Job.ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			l.svc.Cancel(context.Background(), service.CancelRequest{ID: id})
		}
	})
	db, err := bolt.Open(l.state, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("jobs")).Put(binary.BigEndian.AppendUint64(nil, uint64(ids[0])), []byte("\x1d not json"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := l.svc.GPUs(context.Background(), service.HostQuery{})
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	var held []job.ID
	for _, j := range doc.Hosts[0].Jobs {
		held = append(held, j.Job)
	}
	if len(held) != 1 || held[0] != ids[1] || !strings.Contains(doc.JobsError, "unreadable job records") {
		t.Errorf("jobs shown %v (want job %d alone), jobs_error %q", held, ids[1], doc.JobsError)
	}
}
