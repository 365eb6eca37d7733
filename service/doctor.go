package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/doctor"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/units"
)

// DoctorSchema names the document of gssh doctor --json.
const DoctorSchema = "gssh.doctor/v1"

// DoctorDoc is gssh doctor: every check of every host, in inventory
// order, then the order of doctor.Checks.
type DoctorDoc struct {
	Schema string         `json:"schema"`
	Checks []doctor.Check `json:"checks"`
	Failed int            `json:"failed"` // how many checks failed
}

// Doctor runs gssh doctor's checks on the hosts q selects (all when
// empty): a probe of each (SSH, nvidia-smi, the helper, the CUDA
// version), the doctor's script over each one's shell (the login's own
// output, the job directory, setsid, sudo -n, the clock), and the GPU
// processes that are no gssh job's. A host that cannot be reached fails
// its SSH check and skips the others; the other hosts are checked all
// the same. Errors: the inventory's, a host not in it.
func (l *Local) Doctor(ctx context.Context, q HostQuery) (DoctorDoc, error) {
	doc := DoctorDoc{Schema: DoctorSchema, Checks: []doctor.Check{}}
	q.MaxAge = 0 // a probe now, whatever a stream says
	gpus, err := l.GPUs(ctx, q)
	var pe *PartialError
	if err != nil && !errors.As(err, &pe) {
		return doc, err
	}
	f, err := l.hosts()
	if err != nil {
		return doc, err
	}
	found := make([]doctor.Findings, len(gpus.Hosts))
	var wg sync.WaitGroup
	for i, h := range gpus.Hosts {
		host, _ := f.Lookup(h.Host)
		fd := doctor.Findings{Host: h.Host, Snapshot: h.Snapshot, Reached: reachedState(h), Sudo: host.RunAsSudo, Local: host.Local}
		for _, p := range h.Processes {
			if p.Kind == reap.KindForeign || p.Kind == reap.KindUnattributed {
				used := "memory unknown"
				if p.UsedBytes != nil {
					used = units.FormatMem(*p.UsedBytes)
				}
				fd.Foreign = append(fd.Foreign, fmt.Sprintf("GPU %d: pid %d (%s, %s), %s", p.GPU, p.PID, p.Name, cmp.Or(p.User, "user unknown"), used))
			}
		}
		for _, m := range h.Invisible {
			fd.Foreign = append(fd.Foreign, fmt.Sprintf("GPU %d: %s held by processes no probe can see (another container or namespace)", m.GPU, units.FormatMem(m.Bytes)))
		}
		found[i] = fd
		if !fd.Reached {
			continue
		}
		wg.Go(func() {
			sh, err := f.Shell(h.Host)
			if err != nil {
				found[i].ShellErr = err
				return
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			found[i].Sent = time.Now()
			if res, err := sh.Run(sctx, h.Host, doctor.ClockScript, nil); err == nil {
				found[i].Time = string(res.Stdout)
			}
			found[i].Received = time.Now()
			smi := h.State == gpuinfo.HostOK || h.State == gpuinfo.HostDegraded
			res, err := sh.Run(sctx, h.Host, doctor.Script(smi), nil)
			found[i].Shell, found[i].ShellErr = string(res.Stdout), err
			if h.Source == "nvml" {
				// nvidia-smi's own view, to compare with NVML's.
				snap, err := probe.SMI(sh, h.Host).Snapshot(sctx)
				if err != nil && snap.State == "" {
					snap.State, snap.Error = gpuinfo.HostProbeError, err.Error()
				}
				found[i].SMI = &snap
			}
		})
	}
	wg.Wait()
	if err := interrupted(ctx); err != nil {
		return doc, err
	}
	for _, fd := range found {
		for _, c := range doctor.Checks(fd) {
			if c.Verdict == doctor.Fail {
				doc.Failed++
			}
			doc.Checks = append(doc.Checks, c)
		}
	}
	return doc, nil
}

// reachedState reports whether the host answered SSH, by its probe's
// state: a transport state says it did not, and so does a timeout other
// than a probe's that connected (a hung nvidia-smi).
func reachedState(h HostGPUs) bool {
	switch h.State {
	case gpuinfo.HostUnreachable, gpuinfo.HostAuthFailed, gpuinfo.HostKeyMismatch, gpuinfo.HostKeyUnknown, gpuinfo.HostConfigError,
		gpuinfo.HostUnknownHost, gpuinfo.HostConnectionLost, gpuinfo.HostTransportError:
		return false
	case gpuinfo.HostTimeout:
		return strings.Contains(h.Error, "GPU probe did not finish")
	}
	return true
}
