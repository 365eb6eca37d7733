package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

// TestWatchGPUs: a service that keeps GPU streams answers gssh gpus from
// their frames (no probe: the document is as old as its frame) and
// places jobs on them; a query with MaxAge 0 probes.
func TestWatchGPUs(t *testing.T) {
	l := newLab(t, false)
	l.svc.WatchGPUs(100*time.Millisecond, nil)
	if got := l.svc.StreamAge(); got != 200*time.Millisecond {
		t.Fatalf("StreamAge %v, want two intervals", got)
	}
	ctx := context.Background()
	q := service.HostQuery{MaxAge: time.Minute}
	var doc service.GPUsDoc
	streamed := func() bool {
		var err error
		if doc, err = l.svc.GPUs(ctx, q); err != nil {
			t.Fatal(err)
		}
		return doc.Hosts[0].ProbeS == 0 && len(doc.Hosts[0].GPUs) == 4
	}
	deadline := time.Now().Add(10 * time.Second)
	for !streamed() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if doc.Hosts[0].ProbeS != 0 {
		t.Fatalf("no answer from the stream within 10s: %+v", doc.Hosts[0])
	}
	if age := time.Since(doc.Time); age < 0 || age > 2*time.Second {
		t.Errorf("document time %v is %v old", doc.Time, age)
	}
	if doc, err := l.svc.GPUs(ctx, service.HostQuery{}); err != nil || doc.Hosts[0].ProbeS == 0 {
		t.Errorf("MaxAge 0: %v, probe_s %v; want a probe", err, doc.Hosts[0].ProbeS)
	}
	s := spec("true")
	s.MemPerGPU = 1 << 30
	if res := l.submit(t, s); res.Job.State != job.Running || res.Job.Placement.Host != "ctl" {
		t.Fatalf("submitted %+v", res.Job)
	}
}
