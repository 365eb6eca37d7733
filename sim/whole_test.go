//go:build longreplay

// The whole traces, replayed as the README's and docs/simulator.md's
// figures were: minutes of CPU, so `make bench` runs them (go test -tags
// longreplay -run Long ./sim/) and `make test` does not.

package sim

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/gssh/gssh/units"
)

// TestSimulatorDecidesAsTheControllerLong is TestSimulatorDecidesAsTheController
// on 300 jobs.
func TestSimulatorDecidesAsTheControllerLong(t *testing.T) {
	decidesAsTheController(t, 300, map[string]string{
		"gssh":           "ec0a90d4e08b926a",
		"fairshare-only": "687b34acc4737d12", // the default before the multifactor one, as then
		"fifo":           "7b68150d480841df",
		"fifo-backfill":  "935ab5e3328dcfae",
		"firstfit":       "649e67d0b59a317b",
	})
}

// TestWholeTracesLong replays the whole ITP trace on 2 × 8 GPUs (20
// made-up users) and the whole Philly week on 32 × 8 (its teams as users)
// at loads 0.8, 1.0 and 1.3 under every policy, and checks the figures of
// docs/simulator.md's tables, as gssh sim prints them, then each policy's
// report and decisions against their pinned digest (replayDigest).
func TestWholeTracesLong(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // as gssh sim sets it
	type figures struct {
		load    float64
		rows    map[string]string // metric: gssh fifo fifo-backfill firstfit
		digests string            // the four policies' replayDigest
	}
	cases := []struct {
		replay
		unplaceable int
		figures     []figures
	}{
		{replays[0], 0, []figures{
			{0.8, map[string]string{
				"wait mean":               "2d07h 3d13h 3d06h 2d06h",
				"wait p95":                "8d00h 8d02h 7d17h 5d00h",
				"wait max":                "11d20h 10d11h 10d04h 16d02h",
				"waited > 1 day":          "1970 2777 2615 2516",
				"utilization, arrivals":   "75.2% 75.3% 75.3% 75.3%",
				"fairness, waiting users": "0.534 0.627 0.639 0.655",
			}, "eedb6a5456f04b6c c5e5f9e66392dba1 489d74adf0c9138c eccc52676217d1ab"},
			{1.0, map[string]string{
				"wait mean":               "3d10h 4d22h 4d11h 2d22h",
				"wait p95":                "9d07h 9d04h 8d22h 5d16h",
				"wait max":                "12d04h 10d17h 10d13h 17d14h",
				"waited > 1 day":          "2466 3052 2962 2649",
				"utilization, arrivals":   "85.6% 85.0% 86.0% 85.1%",
				"fairness, waiting users": "0.483 0.610 0.587 0.633",
			}, "be917a5e8b1c80e6 edc54eca6cc4bf9e ae8b38388fcc2cb9 d037a0ab150ead5b"},
			{1.3, map[string]string{
				"wait mean":               "4d20h 6d18h 6d04h 3d13h",
				"wait p95":                "11d02h 10d21h 10d11h 7d07h",
				"wait max":                "12d22h 11d17h 11d09h 21d11h",
				"waited > 1 day":          "2626 3358 3277 2914",
				"utilization, arrivals":   "91.5% 90.1% 91.7% 90.0%",
				"fairness, waiting users": "0.491 0.608 0.594 0.587",
			}, "dfbc2e1653af5fec 66efe00262d3750e 885167f9cd92baf9 0c36ae5a9192cfce"},
		}},
		{replays[1], 33, []figures{
			{0.8, map[string]string{
				"wait mean":               "17m48s 3h11m 32m18s 31m20s",
				"wait p95":                "1h15m 22h18m 3h57m 3h53m",
				"wait max":                "2d21h 32h37m 34h03m 45h20m",
				"waited > 1 day":          "10 322 12 22",
				"utilization, arrivals":   "63.4% 63.5% 63.8% 63.6%",
				"fairness, waiting users": "0.715 0.582 0.682 0.682",
			}, "828431ec91cf0bb1 f94964d13b39ad67 21250806698ddcef f0d91669be98eef8"},
			{1.0, map[string]string{
				"wait mean":               "40m22s 11h34m 1h01m 1h11m",
				"wait p95":                "3h23m 2d06h 5h51m 7h41m",
				"wait max":                "4d13h 2d14h 2d23h 2d22h",
				"waited > 1 day":          "31 2476 41 41",
				"utilization, arrivals":   "71.8% 69.7% 72.0% 72.0%",
				"fairness, waiting users": "0.734 0.530 0.651 0.665",
			}, "3b9f5e8db26759d6 2a30c5bcd0bbef85 89af9c51999eda9e 2bcbbffd8c85148a"},
			{1.3, map[string]string{
				"wait mean":               "1h11m 30h12m 3h19m 2h26m",
				"wait p95":                "3h39m 4d14h 11h55m 9h50m",
				"wait max":                "7d05h 4d23h 4d23h 5d18h",
				"waited > 1 day":          "79 4753 89 97",
				"utilization, arrivals":   "76.3% 72.2% 78.6% 76.8%",
				"fairness, waiting users": "0.790 0.510 0.596 0.613",
			}, "c804702018003bc6 a4847b6c63f1bdf8 8d352e94b7516e3c fdc8ad06c0656c13"},
		}},
	}
	cell := map[string]func(Report) string{
		"wait mean":               func(r Report) string { return units.FormatElapsed(r.MeanWait) },
		"wait p95":                func(r Report) string { return units.FormatElapsed(r.P95Wait) },
		"wait max":                func(r Report) string { return units.FormatElapsed(r.MaxWait) },
		"waited > 1 day":          func(r Report) string { return strconv.Itoa(r.WaitedOverDay) },
		"utilization, arrivals":   func(r Report) string { return strconv.FormatFloat(100*r.UtilizationArrivals, 'f', 1, 64) + "%" },
		"fairness, waiting users": func(r Report) string { return strconv.FormatFloat(r.JainWaiting, 'f', 3, 64) },
	}
	for _, tc := range cases {
		s := tc.setup(t)
		for _, f := range tc.figures {
			t.Run(fmt.Sprintf("%s/load%.1f", tc.name, f.load), func(t *testing.T) {
				s.Load = f.load
				c, err := Compare(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				for metric, want := range f.rows {
					var got []string
					for _, r := range c.Reports {
						got = append(got, cell[metric](r))
					}
					if g := strings.Join(got, " "); g != want {
						t.Errorf("%s: %s, docs/simulator.md says %s", metric, g, want)
					}
				}
				var digests []string
				for i, r := range c.Reports {
					if r.Unplaceable != tc.unplaceable {
						t.Errorf("%s: %d jobs never placeable, want %d", r.Policy, r.Unplaceable, tc.unplaceable)
					}
					digests = append(digests, replayDigest(t, r, c.Results[i]))
				}
				if got := strings.Join(digests, " "); got != f.digests {
					t.Errorf("digests %s, pinned %s: a report or a decision changed", got, f.digests)
				}
			})
		}
	}
}
