package service_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
)

// policy sets the lab's inventory policy, and the queue's owner.
func policy(pol sched.Policy, owner string) func(*service.Options) {
	return func(o *service.Options) {
		o.Fleet.Inventory.Policy.Plan = pol
		o.Owner = owner
	}
}

// Priorities 0-3 are for admins: in a queue without an owner (shared-lab
// mode), a user without `admin: true` is refused at submit, gssh run and
// gssh update, and nothing is stored or changed.
func TestAdminBands(t *testing.T) {
	ctx := context.Background()
	pol := sched.Policy{Users: map[string]sched.UserShare{"alice": {Weight: 1, Admin: true}, "ann": {Weight: 1}}}
	l := newLab(t, false, policy(pol, ""))
	const words = "--priority 2: priorities 0-3 are for admins (the queue's owner, and users with `admin: true` in the inventory's policy users), and ann is not one; give 4 (first for everyone else) to 10"
	s := spec("true")
	s.Priority = 2
	_, err := l.svc.Submit(ctx, service.SubmitRequest{Spec: s})
	if err == nil || err.Error() != words+"; nothing was submitted" {
		t.Fatalf("submit: %v", err)
	}
	_, err = l.svc.Submit(ctx, service.SubmitRequest{Spec: s, DryRun: true})
	if err == nil || !strings.HasPrefix(err.Error(), words) {
		t.Errorf("dry run: %v", err)
	}
	_, err = l.svc.Run(ctx, service.RunRequest{Submit: service.SubmitRequest{Spec: s}})
	if err == nil || !strings.HasPrefix(err.Error(), words) {
		t.Errorf("run: %v", err)
	}
	if _, err := os.Stat(l.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state file was made: %v", err)
	}
	// Her own bands are hers: a held job at 4, which update may not raise to 2.
	s.Priority = 4
	res, err := l.svc.Submit(ctx, service.SubmitRequest{Spec: s, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	two := 2
	if _, err := l.svc.Update(ctx, service.UpdateRequest{IDs: []job.ID{res.Job.ID}, Priority: &two}); err == nil || err.Error() != words+"; nothing was updated" {
		t.Errorf("update: %v", err)
	}
	if j, _ := l.svc.Job(ctx, res.Job.ID); j.Spec.Priority != 4 {
		t.Errorf("updated to %d", j.Spec.Priority)
	}

	// An admin may; so may the owner of a personal queue (User = Owner).
	for _, mod := range []func(*service.Options){
		func(o *service.Options) { policy(pol, "")(o); o.User = "alice" },
		policy(sched.Policy{}, "ann"),
	} {
		l := newLab(t, false, mod)
		s.Priority = 0
		if _, err := l.svc.Submit(ctx, service.SubmitRequest{Spec: s, Hold: true}); err != nil {
			t.Errorf("allowed: %v", err)
		}
	}
}

// A job asking for more GPUs than its user's max_gpus cap can never
// start: refused at submit.
func TestSubmitOverCap(t *testing.T) {
	l := newLab(t, false, policy(sched.Policy{DefaultUser: sched.Caps{MaxGPUs: 1}}, "ann"))
	s := spec("true")
	s.GPUs = 2
	_, err := l.svc.Submit(context.Background(), service.SubmitRequest{Spec: s})
	if err == nil || err.Error() != "--gpus 2: ann's cap is max_gpus 1 (the inventory's policy); give --gpus 1 or less; nothing was submitted" {
		t.Errorf("submit: %v", err)
	}
	if _, err := os.Stat(l.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state file was made: %v", err)
	}
}
