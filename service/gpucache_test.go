package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/service"
)

// TestCachedGPUs: gssh serve's answer to gssh gpus is the last probe of
// the same query while it is at most MaxAge old (its error with it),
// else a probe now; another query has its own.
func TestCachedGPUs(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	at := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	l := newLab(t, true, func(o *service.Options) { o.Now = clock; o.Fleet.Now = clock })
	t0 := clock()
	ask := func(q service.HostQuery, wantTime time.Time, partial bool) {
		t.Helper()
		doc, err := l.svc.CachedGPUs(context.Background(), q)
		var pe *service.PartialError
		if errors.As(err, &pe) != partial || (!partial && err != nil) {
			t.Errorf("%+v: error %v, want partial %v", q, err, partial)
		}
		if !doc.Time.Equal(wantTime) || len(doc.Hosts) == 0 {
			t.Errorf("%+v: a document of %s (%d hosts), want one of %s", q, doc.Time, len(doc.Hosts), wantTime)
		}
	}
	all := service.HostQuery{MaxAge: 5 * time.Second}
	ask(all, t0, true)
	at(3 * time.Second)
	ask(all, t0, true) // that probe, and its error
	ask(service.HostQuery{Labels: []string{"a100"}, MaxAge: 5 * time.Second}, t0.Add(3*time.Second), false)
	ask(service.HostQuery{}, t0.Add(3*time.Second), true) // MaxAge 0: a probe now
	at(6 * time.Second)
	ask(all, t0.Add(9*time.Second), true) // older than 5s: probed again
}
