package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/serve"
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
	both := service.HostQuery{Hosts: []string{"ctl", "down"}, MaxAge: time.Minute}
	ask(both, t0.Add(9*time.Second), true)
	at(time.Second)
	ask(service.HostQuery{Hosts: []string{"down", "ctl", "ctl"}, MaxAge: time.Minute}, t0.Add(9*time.Second), true) // the same hosts: that probe
}

// TestCachedGPUsFresh: a request with MaxAge 0 never gets a probe begun
// before it came, even one running for others then.
func TestCachedGPUsFresh(t *testing.T) {
	l := newLab(t, false)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			start := time.Now()
			doc, err := l.svc.CachedGPUs(ctx, service.HostQuery{MaxAge: time.Hour})
			if err != nil || doc.Time.Before(start.Add(-time.Second)) {
				t.Errorf("a cached request: %v, %s", err, doc.Time)
			}
		})
	}
	start := time.Now()
	doc, err := l.svc.CachedGPUs(ctx, service.HostQuery{})
	if err != nil || doc.Time.Before(start) {
		t.Errorf("a fresh request started at %s got the document of %s (%v)", start, doc.Time, err)
	}
	wg.Wait()
}

// TestRemoteFallsBack: a Remote asks the state's gssh serve for GPUs, and
// probes itself where that serve does not answer: none listening, an op
// it does not know, a request it does not answer (another view); its
// other errors are the call's, with their exit status.
func TestRemoteFallsBack(t *testing.T) {
	invFile := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(invFile, []byte("hosts:\n  - name: ctl\n    local: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLab(t, false, func(o *service.Options) { o.Fleet.Inventory, o.Fleet.InventoryPath = nil, invFile })
	r := service.Remote{Local: l.svc}
	ctx := context.Background()
	local, err := r.GPUs(ctx, service.HostQuery{}) // none listens
	if err != nil || len(local.Hosts) != 1 {
		t.Fatalf("no gssh serve: %v, %+v", err, local)
	}
	os.MkdirAll(filepath.Dir(l.svc.SocketPath()), 0o700)
	serveWith := func(h map[string]serve.Handler) func() {
		sl, err := serve.Listen(l.svc.SocketPath(), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			(&serve.Server{Wake: serve.NewWake(), Handlers: h, FaultOf: func(err error) *serve.Fault { return service.FaultOf(err, 7) }}).Serve(sctx, sl)
			close(done)
		}()
		return func() { cancel(); <-done; sl.Close() }
	}
	stop := serveWith(nil) // an older serve: no gpus op
	if doc, err := r.GPUs(ctx, service.HostQuery{}); err != nil || len(doc.Hosts) != 1 {
		t.Errorf("a serve without the op: %v, %+v; want the local probe", err, doc)
	}
	stop()
	stop = serveWith(map[string]serve.Handler{service.OpGPUs: func(context.Context, serve.Peer, json.RawMessage, func(any) error) (any, error) {
		return nil, fmt.Errorf("%w: another view", service.ErrNotServed)
	}})
	if doc, err := r.GPUs(ctx, service.HostQuery{}); err != nil || len(doc.Hosts) != 1 {
		t.Errorf("a serve of another view: %v, %+v; want the local probe", err, doc)
	}
	stop()
	stop = serveWith(map[string]serve.Handler{service.OpGPUs: func(_ context.Context, _ serve.Peer, args json.RawMessage, _ func(any) error) (any, error) {
		var in service.HostsArgs
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		if in.View.Inventory != invFile || in.View.InventorySum == "" {
			return nil, fmt.Errorf("the request's view: %+v", in.View)
		}
		return service.GPUsDoc{Schema: "served"}, &service.PartialError{Failed: 1, Total: 3}
	}})
	defer stop()
	doc, err := r.GPUs(ctx, service.HostQuery{})
	var pe *service.PartialError
	if doc.Schema != "served" || !errors.As(err, &pe) || pe.Failed != 1 || pe.Total != 3 {
		t.Errorf("a served partial answer: %+v, %v", doc, err)
	}
}
