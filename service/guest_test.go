package service_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
)

// TestGuests: the owner of a personal queue makes HTTP API tokens for
// the users its policy lists, and for no one else; such a guest acts on
// their own jobs only (an admin guest on every job), drains and reaps
// nothing, makes no tokens for others and gets no admin priority band.
func TestGuests(t *testing.T) {
	ctx := context.Background()
	pol := sched.Policy{Users: map[string]sched.UserShare{"bob": {Weight: 1}, "cat": {Weight: 1, Admin: true}}}
	l := newLab(t, false, policy(pol, "ann"))
	if _, err := l.svc.CreateToken(ctx, service.TokenRequest{User: "bob"}); err != nil {
		t.Fatalf("ann's token for bob: %v", err)
	}
	if _, err := l.svc.CreateToken(ctx, service.TokenRequest{User: "eve"}); err == nil || !strings.Contains(err.Error(), "eve is not there: add it") {
		t.Errorf("ann's token for eve, whom the policy does not list: %v", err)
	}
	for user, ok := range map[string]bool{"bob": true, "cat": true, "ann": true, "eve": false} {
		got, err := l.svc.PeerUser(serve.Peer{User: user})
		if ok != (err == nil) || ok && got != user || !ok && !errors.Is(err, service.ErrUnknownPeer) {
			t.Errorf("a request of %s's token: %q, %v", user, got, err)
		}
	}
	anns := l.submitHeld(t)
	bob, cat := l.svc.As("bob", nil), l.svc.As("cat", nil)
	if _, err := bob.Cancel(ctx, service.CancelRequest{ID: anns}); !errors.Is(err, service.ErrNotYours) || !strings.Contains(err.Error(), "in ann's queue you may cancel your own jobs only") {
		t.Errorf("bob's cancel of ann's job: %v", err)
	}
	if _, err := bob.Logs(ctx, service.LogsRequest{ID: anns, Tail: -1}, io.Discard); !errors.Is(err, service.ErrNotYours) || !strings.Contains(err.Error(), "its log is for its owner and the admins") {
		t.Errorf("bob reads ann's log: %v", err)
	}
	if _, err := bob.Drain(ctx, service.DrainRequest{Hosts: []string{"ctl"}}); !errors.Is(err, service.ErrNotAdmin) {
		t.Errorf("bob's drain: %v", err)
	}
	if _, err := bob.Reap(ctx, service.ReapRequest{}); err == nil || !strings.Contains(err.Error(), "which only ann does") {
		t.Errorf("bob's reap: %v", err)
	}
	if _, err := bob.CreateToken(ctx, service.TokenRequest{User: "cat"}); err == nil || !strings.Contains(err.Error(), "only ann, whose queue this is, makes tokens for others") {
		t.Errorf("bob's token for cat: %v", err)
	}
	s := spec("true")
	s.Priority = 2
	if _, err := bob.Submit(ctx, service.SubmitRequest{Spec: s, Hold: true}); err == nil || !strings.Contains(err.Error(), "priorities 0-3 are for admins") {
		t.Errorf("bob's --priority 2: %v", err)
	}
	s.Priority = 5
	res, err := bob.Submit(ctx, service.SubmitRequest{Spec: s, Hold: true})
	if err != nil || res.Job.User != "bob" {
		t.Fatalf("bob's submit: %+v, %v", res.Job, err)
	}
	if _, err := bob.Cancel(ctx, service.CancelRequest{ID: res.Job.ID}); err != nil {
		t.Errorf("bob's cancel of his own job: %v", err)
	}
	if _, err := cat.Cancel(ctx, service.CancelRequest{ID: anns}); err != nil {
		t.Errorf("cat, an admin, cancels ann's job: %v", err)
	}
}

// submitHeld submits a held job of the owner's and returns its id.
func (l *lab) submitHeld(t *testing.T) job.ID {
	t.Helper()
	res, err := l.svc.Submit(context.Background(), service.SubmitRequest{Spec: spec("true"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}
