package launch

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec"
)

// Workers does the worker side of jobs on the hosts they are placed on:
// Start, Poll, Cancel and Logs through each host's Shell. It is the real
// control.Workers.
type Workers struct {
	// Cluster is the state's cluster id (names job directories).
	Cluster string
	// Shell returns the runner of an inventory host, or an error naming a
	// host that is not in the inventory (any more).
	Shell func(host string) (Shell, error)
	// Sudo reports whether host runs each job as its owner (run_as: sudo:
	// every command of a job through AsUser); nil: none does.
	Sudo func(host string) bool
}

// shellOf is host's Shell for the commands of user's jobs: through sudo
// as user where host runs jobs as their owners, else the login's.
func (w Workers) shellOf(host, user string) (Shell, error) {
	sh, err := w.Shell(host)
	if err != nil || !w.sudo(host) {
		return sh, err
	}
	return AsUser(sh, user), nil
}

// sudo reports whether host runs jobs as their owners.
func (w Workers) sudo(host string) bool { return w.Sudo != nil && w.Sudo(host) }

// Start launches j on j.Placement.Host; see Start.
func (w Workers) Start(ctx context.Context, j job.Job) (job.Remote, error) {
	sh, err := w.shellOf(j.Placement.Host, j.User)
	if err != nil {
		return job.Remote{}, err
	}
	return Start(ctx, sh, j.Placement.Host, w.Cluster, j)
}

// Poll checks jobs, all placed on host; see Poll.
// On a run_as: sudo host, the jobs of each owner are polled as that
// owner, one command each (in turn: a host has few owners at once); the
// first failure is returned with what the others found.
func (w Workers) Poll(ctx context.Context, host string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	js := make([]job.Job, len(jobs))
	for i, j := range jobs {
		js[i] = *j
	}
	out := map[job.ID]job.Status{}
	var first error
	for _, g := range byOwner(js, w.sudo(host), func(j job.Job) string { return j.User }) {
		sh, err := w.shellOf(host, g.User)
		if err != nil {
			return nil, err
		}
		m, err := Poll(ctx, sh, host, w.Cluster, g.Items)
		if err != nil && first == nil {
			first = noContact(ctx, err)
		}
		for id, st := range m {
			out[id] = st
		}
	}
	if first != nil && len(out) == 0 {
		return nil, first
	}
	return out, first
}

// noContact marks err with job.ErrNoContact when it is a transport
// failure (an *sshexec.Error: the host was not reached, or stopped
// answering) and ctx was not cancelled; other errors are returned as they
// are.
func noContact(ctx context.Context, err error) error {
	var te *sshexec.Error
	if err == nil || ctx.Err() != nil || !errors.As(err, &te) {
		return err
	}
	return &contactError{err}
}

// contactError is an error of a host that did not answer: its text is the
// cause's, and it matches job.ErrNoContact as well as the cause.
type contactError struct{ err error }

func (e *contactError) Error() string { return e.err.Error() }

func (e *contactError) Unwrap() []error { return []error{job.ErrNoContact, e.err} }

// Abandon makes sure j's attempt never starts, unless it has; see Abandon.
func (w Workers) Abandon(ctx context.Context, j job.Job) (bool, error) {
	sh, err := w.shellOf(j.Placement.Host, j.User)
	if err != nil {
		return false, err
	}
	ok, err := Abandon(ctx, sh, j.Placement.Host, w.Cluster, j)
	return ok, noContact(ctx, err)
}

// Stop ends j where it runs; see Stop.
func (w Workers) Stop(ctx context.Context, j job.Job, grace time.Duration, why job.State) (job.Stopped, error) {
	sh, err := w.shellOf(j.Placement.Host, j.User)
	if err != nil {
		return job.Stopped{}, err
	}
	n, err := Stop(ctx, sh, j.Placement.Host, w.Cluster, j, grace, why)
	return n, noContact(ctx, err)
}

// Logs writes j's log to out; see Logs.
func (w Workers) Logs(ctx context.Context, j job.Job, tail int, follow bool, out io.Writer) error {
	sh, err := w.shellOf(j.Placement.Host, j.User)
	if err != nil {
		return err
	}
	return Logs(ctx, sh, j.Placement.Host, w.Cluster, j, tail, follow, out)
}
