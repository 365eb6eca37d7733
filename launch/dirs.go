package launch

import (
	"context"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
)

// JobDir is one launch attempt directory of a queue's job on a worker
// (DirName): the job's id and the attempt (0: a directory of before
// attempts were counted, <cluster>-<id>).
type JobDir struct {
	ID      job.ID
	Attempt int
}

// JobDirs lists the attempt directories of cluster's jobs in the login
// user's ~/.gssh/jobs on host, in one command (none when that directory
// does not exist). Names that are not <cluster>-<id>[.<attempt>] are
// left out. Errors: a *StepError.
func JobDirs(ctx context.Context, run Runner, host, cluster string) ([]JobDir, error) {
	script := `cd "$HOME/.gssh/jobs" 2>/dev/null || exit 0
for d in ` + q(cluster) + `-*; do [ -d "$d" ] && printf '%s\n' "$d"; done; exit 0`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return nil, &StepError{"list job directories", host, err}
	}
	var dirs []JobDir
	for _, name := range strings.Split(string(res.Stdout), "\n") {
		rest, ok := strings.CutPrefix(name, cluster+"-")
		if !ok || rest == "" {
			continue
		}
		idText, attemptText, hasAttempt := strings.Cut(rest, ".")
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil || id == 0 {
			continue
		}
		d := JobDir{ID: job.ID(id)}
		if hasAttempt {
			a, err := strconv.Atoi(attemptText)
			if err != nil || a < 1 {
				continue
			}
			d.Attempt = a
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}
