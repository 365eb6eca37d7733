// Package jobform reads a job as a person writes it: the values of gssh
// submit's flags (sizes like Slurm's, walltimes, --export, --begin,
// dependencies, arrays), given on the command line or as the fields of
// the HTTP API's JSON request, into a service.SubmitRequest. Both front
// ends read them here, so a value means the same in both, and is
// refused with the same words (naming the flag, or the JSON field).
package jobform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

// Form is a job as gssh submit's flags give it, each value as written
// (JSON: the API's request; the names are the flags', with _ for -).
// Empty values are left out: the defaults are the flags'.
type Form struct {
	// Command is the command (see Command).
	Command Command  `json:"command"`
	Host    string   `json:"host,omitempty"`   // a host, or auto ("" too)
	Labels  []string `json:"labels,omitempty"` // --label
	GPUs    *int     `json:"gpus,omitempty"`   // nil: 1
	Mem     string   `json:"mem,omitempty"`    // GPU memory per GPU: 8G ("": whole GPUs; auto: from the command's past peaks)
	CPUs    string   `json:"cpus,omitempty"`
	HostMem string   `json:"host_mem,omitempty"`
	Name    string   `json:"name,omitempty"`
	// Workdir is the directory to run in on the worker: absolute, or
	// under ~; a relative one is taken from Request's wd.
	Workdir  string   `json:"workdir,omitempty"`
	Env      []string `json:"env,omitempty"`    // KEY=VALUE
	Export   string   `json:"export,omitempty"` // NONE (""), ALL, or VAR,VAR=value
	Timeout  string   `json:"timeout,omitempty"`
	Priority *int     `json:"priority,omitempty"` // nil: 5
	// Dependencies: job ids or names (--after, --after-any,
	// --after-notok).
	After      []string `json:"after,omitempty"`
	AfterAny   []string `json:"after_any,omitempty"`
	AfterNotOK []string `json:"after_notok,omitempty"`
	Hold       bool     `json:"hold,omitempty"`
	Array      string   `json:"array,omitempty"`
	Login      bool     `json:"login,omitempty"`
	Begin      string   `json:"begin,omitempty"`
	// Preemption: SignalGrace ("60s") only with Preemptible.
	Preemptible bool   `json:"preemptible,omitempty"`
	SignalGrace string `json:"signal_grace,omitempty"`
	Requeue     bool   `json:"requeue,omitempty"`
	LogLimit    string `json:"log_limit,omitempty"`
	DryRun      bool   `json:"dry_run,omitempty"`
	// Async answers once the job is stored, without waiting for the
	// scheduling pass that places it (the API's; the CLI waits).
	Async bool `json:"async,omitempty"`

	// Fields makes errors name the JSON fields ("mem") rather than the
	// flags ("--mem").
	Fields bool `json:"-"`
}

// Command is a job's command: Argv, its words, run as they are unless
// Shell, where Argv is one shell command (sh -c on the worker). On the
// CLI one word is a shell command; in JSON a string is one, a list of
// words (one too) an argv.
type Command struct {
	Argv  []string
	Shell bool
}

// Words is argv as the CLI gives it: one word a shell command.
func Words(argv []string) Command { return Command{Argv: argv, Shell: len(argv) == 1} }

// UnmarshalJSON takes a list of strings (an argv), or a string (a shell
// command).
func (c *Command) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Command{Argv: []string{s}, Shell: true}
		return nil
	}
	var words []string
	if err := json.Unmarshal(b, &words); err != nil {
		return errors.New(`give the command as a list of words, ["python", "train.py"], or one shell command, "cd ~/p && make"`)
	}
	*c = Command{Argv: words}
	return nil
}

// MarshalJSON writes the command as UnmarshalJSON reads it.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Shell && len(c.Argv) == 1 {
		return json.Marshal(c.Argv[0])
	}
	return json.Marshal(c.Argv)
}

// name is how errors name the flag flag ("host-mem"): --host-mem, or
// host_mem in JSON.
func (f Form) name(flag string) string {
	if f.Fields {
		return strings.ReplaceAll(flag, "-", "_")
	}
	return "--" + flag
}

// Request is the whole submit request at now (gssh's clock, which
// --begin now+1h counts from; loc: the zone a --begin without one is
// in): the spec, the dependencies, the array. environ is what --export
// reads (the submitting environment; nil: none); wd is the directory a
// relative Workdir (and an empty one) is taken from (""; a relative one
// is refused, an empty one is ~, the job's home). warn is told of what
// is taken but may not be meant (a bare size in MiB, a --begin past).
func (f Form) Request(warn func(string), now time.Time, loc *time.Location, environ []string, wd string) (service.SubmitRequest, error) {
	s, err := f.spec(warn, now, loc, environ, wd)
	if err != nil {
		return service.SubmitRequest{}, err
	}
	r := service.SubmitRequest{Spec: s, DryRun: f.DryRun, Hold: f.Hold, Async: f.Async}
	for _, d := range []struct {
		flag string
		ids  []string
		kind job.DepKind
	}{{"after", f.After, job.AfterOK}, {"after-any", f.AfterAny, job.AfterAny}, {"after-notok", f.AfterNotOK, job.AfterNotOK}} {
		if len(d.ids) == 0 {
			continue
		}
		refs, err := service.ParseRefs(d.ids)
		if err != nil {
			return r, fmt.Errorf("%s: %w", f.name(d.flag), err)
		}
		for _, ref := range refs {
			if dep := (service.DepRef{Kind: d.kind, Ref: ref}); !slices.Contains(r.After, dep) {
				r.After = append(r.After, dep)
			}
		}
	}
	if f.Array != "" {
		if r.Array, r.ArrayLimit, err = sched.ParseArray(f.Array); err != nil {
			if f.Fields {
				err = fmt.Errorf("array: %w", err)
			}
			return r, err
		}
	}
	return r, nil
}

// spec is the job's spec of Request.
func (f Form) spec(warn func(string), now time.Time, loc *time.Location, environ []string, wd string) (job.Spec, error) {
	s := job.Spec{Argv: f.Command.Argv, Shell: f.Command.Shell && len(f.Command.Argv) == 1, Host: f.Host, Labels: f.Labels, GPUs: 1,
		Priority: 5, Name: f.Name, Workdir: f.Workdir, Login: f.Login, Preemptible: f.Preemptible, Requeue: f.Requeue}
	if s.Host == "" {
		s.Host = "auto"
	}
	if f.GPUs != nil {
		s.GPUs = *f.GPUs
	}
	if f.Priority != nil {
		s.Priority = *f.Priority
	}
	// The ranges the service checks too, here in the field's words.
	switch {
	case s.GPUs < 1:
		return s, fmt.Errorf("%s %d: a job needs at least 1 GPU", f.name("gpus"), s.GPUs)
	case s.Priority < 0 || s.Priority > 10:
		return s, fmt.Errorf("%s %d: give 0 (first) to 10 (last)", f.name("priority"), s.Priority)
	}
	if len(f.Command.Argv) == 0 || f.Command.Shell && strings.TrimSpace(f.Command.Argv[0]) == "" {
		if f.Fields {
			return s, errors.New(`command: empty: give the command, as ["python", "train.py"] or "cd ~/p && make"`)
		}
		return s, errors.New("empty command: give it after --, e.g. -- python train.py")
	}
	var err error
	if strings.EqualFold(strings.TrimSpace(f.Mem), "auto") {
		s.MemAuto = &job.MemAuto{} // chosen at submit, from the command's past peaks
	} else if s.MemPerGPU, err = Mem(f.name("mem"), f.Mem, warn); err != nil {
		return s, err
	}
	if s.CPUs, err = CPUs(f.name("cpus"), f.CPUs); err != nil {
		return s, err
	}
	if s.HostMem, err = Mem(f.name("host-mem"), f.HostMem, warn); err != nil {
		return s, err
	}
	if s.LogLimit, err = LogLimit(f.name("log-limit"), f.LogLimit); err != nil {
		return s, err
	}
	if f.Timeout != "" {
		if s.Timeout, err = units.ParseWalltime(f.Timeout); err != nil {
			return s, fmt.Errorf("%s: %w", f.name("timeout"), err)
		}
	}
	if f.SignalGrace != "" {
		grace := f.name("signal-grace")
		if !f.Preemptible {
			return s, fmt.Errorf("%s is the grace of a preemption: give it with %s", grace, f.name("preemptible"))
		}
		d, err := time.ParseDuration(f.SignalGrace)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return s, fmt.Errorf("%s %s: give a duration from 1s to 24h, such as 60s", grace, f.SignalGrace)
		}
		s.SignalGrace = d
	}
	exported, err := ExportEnv(f.name("export"), f.Export, environ, warn)
	if err != nil {
		return s, err
	}
	s.Env = exported
	for _, kv := range f.Env {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return s, fmt.Errorf("%s %q: give KEY=VALUE", f.name("env"), kv)
		case !shellName(k):
			return s, fmt.Errorf("%s %q=...: the name must be letters, digits and _ (not starting with a digit)", f.name("env"), k)
		}
		if i := slices.IndexFunc(s.Env, func(e job.EnvVar) bool { return e.Key == k }); i >= 0 && i < len(exported) {
			s.Env[i].Value = v // --env wins over --export
			continue
		}
		s.Env = append(s.Env, job.EnvVar{Key: k, Value: v})
	}
	if f.Begin != "" {
		b, err := sched.ParseBegin(f.Begin, now, loc)
		if err != nil {
			if f.Fields {
				err = fmt.Errorf("begin: %w", err)
			}
			return s, err
		}
		if b.Before(now.Add(-time.Minute)) {
			warn(fmt.Sprintf("%s %s is %s, in the past: the job may start at once", f.name("begin"), f.Begin, b.Format("2006-01-02 15:04 MST")))
		}
		s.Begin = b.UTC()
	}
	if !filepath.IsAbs(s.Workdir) && !strings.HasPrefix(s.Workdir, "~") {
		switch {
		case wd != "":
			s.Workdir = filepath.Join(wd, s.Workdir)
		case s.Workdir == "":
			s.Workdir = "~"
		default:
			return s, fmt.Errorf("%s %q: give an absolute directory, or one under ~ (the job's home on the worker)", f.name("workdir"), s.Workdir)
		}
	}
	return s, nil
}
