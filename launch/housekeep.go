package launch

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
)

// maxRemoveScript bounds the script of one RemoveDirs call (the paths
// are in it, quoted): dirs past it are answered "not tried", for a
// later call.
const maxRemoveScript = 96 << 10

// RemoveDirs removes the directories of ended jobs' attempts on host,
// in one session (housekeeping: the caller makes sure each job has
// ended, and is of cluster). Each is the directory recorded at launch
// (WorkerDir.Dir, absolute) or, when none was recorded, the attempt's
// default (DirName, under the login's home). A recorded path is removed
// only when it is this queue's: a clean absolute path ending in
// .gssh/jobs/<cluster>-<job>.<attempt> (DirName's last two parts), with
// no newline; anything else is left alone and answered with an Err.
// Every path reaches the worker's shell quoted (shellescape), and the
// worker checks the name again before `rm -rf --`.
//
// Of each it says, in dirs' order: Gone when there was nothing there,
// else the bytes it held (du -sk) once removed, or the Err of a removal
// that failed (rm -rf left it: permissions, a busy NFS file).
func RemoveDirs(ctx context.Context, run Runner, host, cluster string, dirs []job.WorkerDir) ([]job.DirRemoval, error) {
	out := make([]job.DirRemoval, len(dirs))
	var b strings.Builder
	b.WriteString(jobdirFn + `cid=` + q(cluster) + `
rmd() {
  jobdir "$2"
  case ${d%/} in */.gssh/jobs/"$cid"-[0-9]*) ;; *) echo "$1 refused"; return ;; esac
  if [ ! -e "$d" ] && [ ! -L "$d" ]; then echo "$1 gone"; return; fi
  k=$(du -sk -- "$d" 2>/dev/null | cut -f1)
  rm -rf -- "$d" 2>/dev/null
  if [ -e "$d" ] || [ -L "$d" ]; then echo "$1 failed"; else echo "$1 removed ${k:-0}"; fi
}
`)
	tried := 0
	for i, w := range dirs {
		p, err := removable(cluster, w)
		if err != nil {
			out[i].Err = err.Error()
			continue
		}
		line := "rmd " + strconv.Itoa(i) + " " + q(p) + "\n"
		if b.Len()+len(line) > maxRemoveScript {
			out[i].Err = "not tried: too many directories for one command (the next pass removes it)"
			continue
		}
		b.WriteString(line)
		tried++
	}
	if tried == 0 {
		return out, nil
	}
	res, err := run.Run(ctx, host, b.String(), nil)
	if err != nil {
		return nil, &StepError{"remove job directories", host, err}
	}
	seen := make([]bool, len(dirs))
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		i, err := strconv.Atoi(f[0])
		if err != nil || i < 0 || i >= len(dirs) || seen[i] {
			continue
		}
		seen[i] = true
		switch f[1] {
		case "gone":
			out[i].Gone = true
		case "removed":
			if len(f) > 2 {
				kib, _ := strconv.ParseUint(f[2], 10, 64)
				out[i].Bytes = kib << 10
			}
		case "refused":
			out[i].Err = "the worker refused the path: not a gssh job directory of this queue"
		default:
			out[i].Err = "rm -rf could not remove it (permissions?)"
		}
	}
	for i := range dirs {
		if !seen[i] && out[i].Err == "" {
			out[i].Err = "no answer from the worker for it"
		}
	}
	return out, nil
}

// removable is the path RemoveDirs removes for w, or why it will not.
func removable(cluster string, w job.WorkerDir) (string, error) {
	def := DirName(cluster, w.Job, w.Attempt)
	if w.Dir == "" {
		return def, nil
	}
	p := w.Dir
	ok := path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, "\n\x00") &&
		path.Base(p) == path.Base(def) && path.Base(path.Dir(p)) == "jobs" && path.Base(path.Dir(path.Dir(p))) == ".gssh"
	if !ok {
		return "", fmt.Errorf("its recorded directory %q is not a gssh job directory of this queue (.gssh/jobs/%s): left alone", p, path.Base(def))
	}
	return p, nil
}

// RemoveDirs removes dirs, all on host; see RemoveDirs.
// On a run_as: sudo host, each owner's directories (WorkerDir.User) are
// removed as that owner, one command per owner.
func (w Workers) RemoveDirs(ctx context.Context, host string, dirs []job.WorkerDir) ([]job.DirRemoval, error) {
	out := make([]job.DirRemoval, len(dirs))
	for _, g := range byOwner(dirs, w.sudo(host), func(d job.WorkerDir) string { return d.User }) {
		sh, err := w.shellOf(host, g.User)
		if err != nil {
			return nil, err
		}
		res, err := RemoveDirs(ctx, sh, host, w.Cluster, g.Items)
		if err != nil {
			return nil, noContact(ctx, err)
		}
		for k, i := range g.At {
			out[i] = res[k]
		}
	}
	return out, nil
}
