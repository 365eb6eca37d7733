package sim

import (
	"context"
	"os"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/gssh/gssh/sim/trace"
)

// replay is one of the README's speed targets: a whole trace, all four
// policies, as `gssh sim` runs them.
type replay struct {
	name, trace, lab string
	users            int    // made-up users (--users)
	teams            string // raw file to join users from (--users-from FILE:cluster)
}

var replays = []replay{
	// The targets: under 2 s and under 5 s on a 2-core machine.
	{name: "itp-2x8", trace: "testdata/itp-cluster05.norm.csv", lab: "2x8xV100-32G", users: 20},
	{name: "philly-32x8", trace: "testdata/philly-pollux-20171021-7d.norm.csv", lab: "32x8xV100-32G", teams: "testdata/philly-pollux-20171021-7d.teams.csv"},
}

func (r replay) setup(tb testing.TB) Setup {
	f, err := os.Open(r.trace)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	t, err := trace.Read(r.trace, f)
	if err != nil {
		tb.Fatal(err)
	}
	switch {
	case r.users > 0:
		if err := t.AssignUsers(r.users); err != nil {
			tb.Fatal(err)
		}
	case r.teams != "":
		raw, err := os.Open(r.teams)
		if err != nil {
			tb.Fatal(err)
		}
		defer raw.Close()
		if err := t.UsersFrom(r.teams, raw, "cluster"); err != nil {
			tb.Fatal(err)
		}
	}
	hosts, err := ParseLab(r.lab, 0)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := ParseWalltime("x2")
	if err != nil {
		tb.Fatal(err)
	}
	return Setup{Lab: r.lab, Hosts: hosts, Trace: t, Policies: Policies, Load: 1, Convert: Convert{Walltime: w, FracOf: SmallestGPU(hosts)}}
}

// BenchmarkReplay replays the ITP trace on 2 × 8 GPUs (20 made-up users)
// and the Philly week on 32 × 8 (teams as users), at load 1.0, all four
// policies in parallel, with the garbage collector set as `gssh sim` sets
// it (GOGC 400). peak-RSS-MiB is the test process's peak resident memory
// so far (getrusage): run one replay per process to read it for that one
// (-bench 'Replay/philly').
func BenchmarkReplay(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, r := range replays {
		b.Run(r.name, func(b *testing.B) {
			s := r.setup(b)
			b.ReportAllocs()
			for b.Loop() {
				c, err := Compare(context.Background(), s)
				if err != nil {
					b.Fatal(err)
				}
				if c.Reports[0].Started == 0 {
					b.Fatal("no job ran")
				}
			}
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB") // Linux: KiB
			}
		})
	}
}
