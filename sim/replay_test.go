package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// outcomesDigest is the first 16 hex digits of the sha256 of outcomes,
// one "%+v" line each: every job's placeability, start, end, host and
// share. Any decision that changes changes it.
func outcomesDigest(outcomes []Outcome) string {
	h := sha256.New()
	for _, o := range outcomes {
		fmt.Fprintf(h, "%+v\n", o)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// replayDigest is the first 16 hex digits of the sha256 of a policy's
// report as gssh sim --json writes it, then its outcomes (outcomesDigest's
// lines).
func replayDigest(tb testing.TB, r Report, res *Result) string {
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	h := sha256.New()
	h.Write(b)
	for _, o := range res.Jobs {
		fmt.Fprintf(h, "%+v\n", o)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestReplayExcerpts replays the 300-job excerpts of ITP (made-up users)
// and Philly (its teams as users) under every policy, at load 1.0: every
// job placeable runs, a second replay reports the same, and each policy's
// report and decisions match their pinned digest (replayDigest). The
// whole traces are the benchmark's, the README's and `make bench`'s
// (TestWholeTraces, build tag longreplay).
func TestReplayExcerpts(t *testing.T) {
	excerpts := []struct {
		replay
		digests map[string]string // by policy
	}{
		{replay{name: "itp", trace: "trace/testdata/itp-cluster05-300.norm.csv", lab: "1x8xV100-32G", users: 5},
			map[string]string{"gssh": "2ee6b516109fe6ea", "fairshare-only": "5a626a346c4da7d1", "fifo": "9b19d5296bac36eb", "fifo-backfill": "6e188e8e0964bca3", "firstfit": "a92b34ca86084d0f"}},
		{replay{name: "philly", trace: "trace/testdata/philly-pollux-20171021-7d-300.norm.csv", lab: "2x8xV100-32G", teams: "trace/testdata/philly-pollux-20171021-7d-300.csv"},
			map[string]string{"gssh": "589e9a53d5a60e69", "fairshare-only": "e901f46c4eb05a13", "fifo": "c43329da656da40c", "fifo-backfill": "67dc5bb96a550f75", "firstfit": "dde85844448aca0a"}},
	}
	for _, r := range excerpts {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			s := r.setup(t)
			old, err := ParsePolicies("fairshare-only")
			if err != nil {
				t.Fatal(err)
			}
			s.Policies = slices.Concat(Policies, old)
			c, err := Compare(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Reports) != len(s.Policies) {
				t.Fatalf("%d reports", len(c.Reports))
			}
			for i, rep := range c.Reports {
				if rep.NeverStarted != 0 || rep.Started != c.Reports[0].Started || rep.Started+rep.Unplaceable != c.Jobs || rep.Started == 0 {
					t.Errorf("%s: %d jobs run, %d never placeable, %d never started, of %d", rep.Policy, rep.Started, rep.Unplaceable, rep.NeverStarted, c.Jobs)
				}
				if rep.Policy == "fairshare-only" {
					// The default before the multifactor one, pinned as
					// it was then, under its name then.
					rep.Policy, rep.About = "gssh", "priority class, then fair-share; best fit; EASY backfill"
				}
				if got, want := replayDigest(t, rep, c.Results[i]), r.digests[s.Policies[i].Name]; got != want {
					t.Errorf("%s: digest %s, pinned %s: a report or a decision changed", s.Policies[i].Name, got, want)
				}
			}
			again, err := Compare(context.Background(), s)
			if err != nil || !reflect.DeepEqual(again.Reports, c.Reports) {
				t.Errorf("a second replay differs (%v)", err)
			}
		})
	}
}
