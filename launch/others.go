package launch

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
)

// OtherJob is a job of another gssh queue live on a worker: its queue's
// cluster id and its record as its job directory keeps it (spec.json, as
// written when it was placed: its placement, user and requests).
type OtherJob struct {
	Queue string
	Job   job.Job
}

// maxSpecRead bounds what OtherQueues reads of one spec.json.
const maxSpecRead = 256 << 10

// OtherQueues lists the jobs of other gssh queues (job directories under
// the login user's ~/.gssh/jobs whose cluster id is not cluster: another
// state file of the same login, or a shared queue next to a personal one)
// that are live on host: running (their pid file names a live process with
// its start time, on this worker: a directory seen through a home shared
// over NFS, of a job on another host, is not), or starting (claimed, no
// pid yet, made less than a minute ago, and placed on host by name). Ended,
// abandoned and stale directories are left out, as are ones whose
// spec.json cannot be read. Other logins' queues cannot be read here: their
// jobs are seen through their GPU processes, as any foreign process is.
func OtherQueues(ctx context.Context, run Runner, host, cluster string) ([]OtherJob, error) {
	script := aliveFn + `
cid=` + q(cluster) + `
now=$(date +%s)
for d in "$HOME"/.gssh/jobs/*/; do
  [ -d "$d" ] || continue
  d=${d%/}; name=${d##*/}
  case $name in "$cid"-*) [ -n "$cid" ] && continue ;; esac
  [ -e "$d/exit" ] || [ -e "$d/abandoned" ] || [ ! -s "$d/spec.json" ] && continue
  live=
  if [ -s "$d/pid" ]; then
    read -r pid st <"$d/pid" && alive "$pid" "$st" && live=running
  elif [ ! -e "$d/go" ]; then
    m=$(stat -c %Y "$d" 2>/dev/null) && [ $((now - m)) -lt 60 ] && live=starting
  fi
  [ -n "$live" ] || continue
  printf 'job %s %s\n' "$name" "$live"
  head -c ` + strconv.Itoa(maxSpecRead) + ` "$d/spec.json" | head -n 1
  echo
done`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return nil, &StepError{"list other queues", host, err}
	}
	return parseOthers(string(res.Stdout), host), nil
}

// parseOthers reads OtherQueues' answer: "job NAME STATE" lines, each
// followed by the job's spec.json on one line.
func parseOthers(out, host string) []OtherJob {
	var jobs []OtherJob
	lines := strings.Split(out, "\n")
	for i := 0; i+1 < len(lines); i++ {
		f := strings.Fields(lines[i])
		if len(f) != 3 || f[0] != "job" {
			continue
		}
		name, state := f[1], f[2]
		k := strings.LastIndexByte(name, '-')
		if k <= 0 {
			continue
		}
		var j job.Job
		if err := json.Unmarshal([]byte(lines[i+1]), &j); err != nil || len(j.Placement.GPUs) == 0 {
			continue
		}
		i++
		if state == "starting" && j.Placement.Host != host {
			continue // a directory of a launch on another host, seen through a shared home
		}
		jobs = append(jobs, OtherJob{Queue: name[:k], Job: j})
	}
	return jobs
}

// claimSteps is the part of a launcher, after the attempt's directory
// and spec.json are written (so that a launch of another queue that comes
// next sees this one as starting), that makes sure no live job of another
// gssh queue of this login holds the job's GPUs: exclusively, or at all
// when this job is exclusive. It looks under a lock every queue's
// launcher takes ($HOME/.gssh/jobs/.claim, a directory: mkdir is atomic;
// one left by a launcher that died is taken over after 10 s), so two
// queues' passes launching at the same moment cannot both take a GPU. A
// GPU is matched by its UUID (UUIDs name one GPU, whatever a host is
// called); GPUs without one are left to the planner. On a conflict it
// abandons the attempt and fails definitely (exit exitDefinite), saying
// which job holds the GPU.
func claimSteps(j job.Job, cluster string) string {
	var ids []string
	for _, g := range j.Placement.GPUs {
		if strings.HasPrefix(g, "GPU-") || strings.HasPrefix(g, "MIG-") {
			ids = append(ids, q(g))
		}
	}
	if len(ids) == 0 {
		return ""
	}
	excl := "0"
	if j.Spec.MemPerGPU == 0 {
		excl = "1"
	}
	return `
lk="$HOME/.gssh/jobs/.claim"; i=0
while ! mkdir "$lk" 2>/dev/null; do
  m=$(stat -c %Y "$lk" 2>/dev/null) && [ $(( $(date +%s) - m )) -gt 10 ] && rmdir "$lk" 2>/dev/null
  i=$((i+1)); [ $i -gt 1000 ] && { : >"$d/abandoned"; mkdir "$d/go"; fail "the launch lock $lk is held for more than 10s"; }
  sleep 0.01
done
cid=` + q(cluster) + `; excl=` + excl + `; now=$(date +%s); held=
for o in "$HOME"/.gssh/jobs/*/; do
  o=${o%/}; name=${o##*/}
  case $name in "$cid"-*) continue ;; esac
  [ -e "$o/exit" ] || [ -e "$o/abandoned" ] || [ ! -s "$o/spec.json" ] && continue
  if [ -s "$o/pid" ]; then
    read -r opid ost <"$o/pid" && alive "$opid" "$ost" || continue
  else
    [ -e "$o/go" ] && continue
    m=$(stat -c %Y "$o" 2>/dev/null) && [ $((now - m)) -lt 60 ] || continue
  fi
  theirs=1; grep -q '"mem_per_gpu_bytes"' "$o/spec.json" && theirs=0
  [ "$excl" = 1 ] || [ "$theirs" = 1 ] || continue
  for g in ` + strings.Join(ids, " ") + `; do
    if grep -qF "\"$g\"" "$o/spec.json"; then held="$g ($name)"; break 2; fi
  done
done
rmdir "$lk"
if [ -n "$held" ]; then : >"$d/abandoned"; mkdir "$d/go"; fail "GPU $held is held by a job of another gssh queue: this attempt is abandoned"; fi`
}
