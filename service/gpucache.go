package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/gssh/gssh/serve"
)

// gpusCache is what gssh serve's service answers gssh gpus from: each
// query's last document and when its probe finished. Requests that come
// while a query's probe runs wait for that one probe.
type gpusCache struct {
	mu     sync.Mutex
	docs   map[string]cachedGPUs
	flight singleflight.Group
	probes chan struct{} // one slot a probe running for a request: at most maxGPUsProbes
}

type cachedGPUs struct {
	doc GPUsDoc
	err error // nil, or a *PartialError: the document is whole
}

// CachedGPUs is GPUs for gssh serve's answers: a document of the same
// query (hosts and labels) whose probe finished at most q.MaxAge ago
// stands for a new one (its Time says when); else the hosts are probed
// now, once for every request with a MaxAge that comes meanwhile (the
// probe goes on for the others when the one that started it gives up,
// up to serve.OpTimeout). A request with MaxAge 0 gets a probe of its
// own, begun after it came. At most maxGPUsProbes run at once: beyond,
// an error wrapping ErrNotServed (the client probes itself).
func (l *Local) CachedGPUs(ctx context.Context, q HostQuery) (GPUsDoc, error) {
	c := &l.gpus
	key := queryKey(q)
	probe := func() (got cachedGPUs) {
		select {
		case c.slots() <- struct{}{}:
			defer func() { <-c.probes }()
		default:
			return cachedGPUs{err: fmt.Errorf("%w: %d probes of the hosts run already", ErrNotServed, maxGPUsProbes)}
		}
		defer func() {
			if r := recover(); r != nil { // the daemon goes on
				got = cachedGPUs{err: fmt.Errorf("probing the hosts failed: %v", r)}
			}
		}()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serve.OpTimeout)
		defer cancel()
		doc, err := l.GPUs(pctx, q) // hosts with a stream frame of at most q.MaxAge are answered from it
		var pe *PartialError
		if err == nil || errors.As(err, &pe) {
			c.mu.Lock()
			if c.docs == nil || len(c.docs) >= maxCachedQueries {
				c.docs = map[string]cachedGPUs{} // queries are few; a flood of them is forgotten
			}
			// Probes of one query may end out of order (the first of a
			// daemon pushes the helper): an older document never
			// replaces a newer one.
			if prev, ok := c.docs[key]; !ok || !doc.Time.Before(prev.doc.Time) {
				c.docs[key] = cachedGPUs{doc, err}
			}
			c.mu.Unlock()
		}
		return cachedGPUs{doc, err}
	}
	if q.MaxAge <= 0 {
		got := probe()
		return got.doc, got.err
	}
	c.mu.Lock()
	got, ok := c.docs[key]
	c.mu.Unlock()
	if ok && l.opt.Now().Sub(got.doc.Time) <= q.MaxAge {
		return got.doc, got.err
	}
	ch := c.flight.DoChan(key, func() (any, error) { return probe(), nil })
	select {
	case r := <-ch:
		got := r.Val.(cachedGPUs)
		return got.doc, got.err
	case <-ctx.Done():
		return GPUsDoc{}, interrupted(ctx)
	}
}

// queryKey names the hosts q selects: its names and labels each as a
// set (the document lists the hosts in inventory order, whatever the
// query's), so that "a,b", "b,a" and "a,a,b" share one probe. Only an
// error's words depend on the query's order, and errors but a partial
// one are never kept.
func queryKey(q HostQuery) string {
	set := func(xs []string) string {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return strings.Join(slices.Compact(xs), ",")
	}
	return set(q.Hosts) + "\x00" + set(q.Labels)
}

// slots is c.probes, made on first use.
func (c *gpusCache) slots() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probes == nil {
		c.probes = make(chan struct{}, maxGPUsProbes)
	}
	return c.probes
}

// maxCachedQueries is how many queries' documents gssh serve keeps;
// maxGPUsProbes how many probes it runs at once for gssh gpus (each
// shares the passes' SSH connections, and sshd's MaxSessions).
const (
	maxCachedQueries = 256
	maxGPUsProbes    = 4
)
