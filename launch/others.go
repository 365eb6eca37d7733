package launch

import (
	"context"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
)

// The claims registry. Every launch leaves, on its worker, a small file
// naming the GPUs it takes, in one directory every login of the host can
// read and add to:
//
//	$GSSH_CLAIMS_DIR, else /dev/shm/gssh-claims (tmpfs: gone with a
//	reboot, as the jobs are), else /tmp/gssh-claims; made mode 1777 (as
//	/tmp: each login may remove only its own files)
//
// one file per launch attempt, named as its job directory
// (<cluster>-<id>.<attempt>), mode 0644, one line:
//
//	v1 PID TICKS EPOCH USER EXCL MEM GPU...
//
// PID TICKS the job's session leader and its start time (/proc/PID/stat)
// once run.sh has recorded them, "- -" while it starts; EPOCH when the
// claim was made (the worker's clock, seconds); USER the gssh user the
// job is of; EXCL 1 for a job that takes its GPUs whole; MEM its GPU
// memory per GPU (bytes); the GPUs by UUID. A claim counts while its
// process lives (or, starting, for a minute): so two gssh queues (two
// state files, two logins, a shared lab queue next to a personal one)
// see each other's jobs on a host whatever their homes, and a home
// shared over NFS shows no other host's. Claims of processes that are
// gone are removed by their own login's next look.

// ClaimsDirEnv names the environment variable that moves the registry.
const ClaimsDirEnv = "GSSH_CLAIMS_DIR"

// claimsFn defines:
//
//	claims              sets r to the registry directory, making it
//	claimlive FILE      true when claim FILE counts (reads its fields
//	                    into c_pid c_st c_epoch c_user c_excl c_mem c_gpus)
const claimsFn = `
claims() {
  r=${GSSH_CLAIMS_DIR:-}
  if [ -z "$r" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then r=/dev/shm/gssh-claims; else r=/tmp/gssh-claims; fi
  fi
  [ -d "$r" ] || mkdir -m 1777 "$r" 2>/dev/null || mkdir -p "$r" 2>/dev/null
}
claimlive() {
  read -r c_v c_pid c_st c_epoch c_user c_excl c_mem c_gpus <"$1" 2>/dev/null || return 1
  [ "$c_v" = v1 ] || return 1
  if [ "$c_pid" = - ]; then [ $(( $(date +%s) - c_epoch )) -lt 60 ]; else alive "$c_pid" "$c_st"; fi
}`

// OtherJob is a job of another gssh queue live on a worker, as its claim
// says: its queue's cluster id, and a job record with its id, user, GPU
// memory per GPU (0: exclusive) and placement (the GPUs it claims, on
// the host asked).
type OtherJob struct {
	Queue string
	Job   job.Job
}

// OtherQueues lists the jobs of other gssh queues live on host (claims of
// other cluster ids in the registry; see the registry's doc above), and
// removes the dead claims of this login. Other logins' queues are listed
// too: the registry is the host's, not a home's.
func OtherQueues(ctx context.Context, run Runner, host, cluster string) ([]OtherJob, error) {
	script := aliveFn + claimsFn + `
claims; cid=` + q(cluster) + `; me=$(id -u)
for f in "$r"/*-*; do
  [ -f "$f" ] || continue
  name=${f##*/}
  if ! claimlive "$f"; then [ -O "$f" ] && rm -f "$f"; continue; fi
  case $name in "$cid"-*) [ -n "$cid" ] && continue ;; esac
  printf 'claim %s %s %s %s %s\n' "$name" "$c_user" "$c_excl" "$c_mem" "$c_gpus"
done`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return nil, &StepError{"list other queues", host, err}
	}
	return parseOthers(string(res.Stdout), host), nil
}

// parseOthers reads OtherQueues' answer: "claim NAME USER EXCL MEM GPU..."
// lines.
func parseOthers(out, host string) []OtherJob {
	var jobs []OtherJob
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "claim" {
			continue
		}
		name := f[1]
		k := strings.LastIndexByte(name, '-')
		if k <= 0 {
			continue
		}
		idPart, _, _ := strings.Cut(name[k+1:], ".")
		id, err1 := strconv.ParseUint(idPart, 10, 64)
		mem, err2 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if f[3] == "1" {
			mem = 0
		}
		j := job.Job{ID: job.ID(id), User: f[2], State: job.Running, Spec: job.Spec{MemPerGPU: mem, GPUs: len(f) - 5},
			Placement: job.Placement{Host: host, GPUs: f[5:]}}
		jobs = append(jobs, OtherJob{Queue: name[:k], Job: j})
	}
	return jobs
}

// claimSteps is the part of a launcher, after the attempt's directory is
// made (`jobdir` set d; aliveFn, claimsFn and `fail` defined), that
// claims the job's GPUs in the registry, and gives up (the attempt
// abandoned, a definite failure) when another gssh queue's live claim
// holds one of them: exclusively, or at all when this job is exclusive.
// The claim is written before the look, so of two launches of two queues
// at the same moment at least one sees the other and gives up (both may:
// each is then queued again; never do both take the GPU). A registry
// this login cannot write to fails the launch definitely, saying how to
// mend it: a job unclaimed could share its GPUs unseen. GPUs are
// matched by UUID; GPUs without one are left to the planner. It leaves cl
// set to the claim file, for claimPid.
func claimSteps(j job.Job, cluster string) string {
	var ids []string
	for _, g := range j.Placement.GPUs {
		if strings.HasPrefix(g, "GPU-") || strings.HasPrefix(g, "MIG-") {
			ids = append(ids, q(g))
		}
	}
	if len(ids) == 0 {
		return "\ncl="
	}
	excl := "0"
	if j.Spec.MemPerGPU == 0 {
		excl = "1"
	}
	return `
claims; cl="$r/${d##*/}"; cid=` + q(cluster) + `; mine=` + excl + `
{ { printf 'v1 - - %s %s %s %s' "$(date +%s)" ` + q(cmpUser(j.User)) + ` "$mine" ` + strconv.FormatUint(j.Spec.MemPerGPU, 10) + `; printf ' %s' ` + strings.Join(ids, " ") + `; echo; } >"$cl.tmp" && chmod 0644 "$cl.tmp" && mv -f "$cl.tmp" "$cl"; } 2>/dev/null || {
  : >"$d/abandoned"; mkdir "$d/go"
  fail "the GPU claims registry $r cannot be written by $(id -un) (make it a directory of mode 1777, or name another with GSSH_CLAIMS_DIR on the worker): a job whose GPUs cannot be claimed is not started"
}
held=
if [ -n "$cl" ]; then
  for f in "$r"/*-*; do
    [ -f "$f" ] || continue
    case ${f##*/} in "$cid"-*) continue ;; esac
    claimlive "$f" || continue
    [ "$mine" = 1 ] || [ "$c_excl" = 1 ] || continue
    for g in ` + strings.Join(ids, " ") + `; do
      case " $c_gpus " in *" $g "*) held="$g (${f##*/}, user $c_user)"; break 2 ;; esac
    done
  done
fi
if [ -n "$held" ]; then rm -f "$cl"; : >"$d/abandoned"; mkdir "$d/go"; fail "GPU $held is held by a job of another gssh queue: this attempt is abandoned"; fi`
}

// claimPid rewrites claim $cl with the pid and start time run.sh recorded
// in $d/pid (a no-op without a claim).
const claimPid = `
if [ -n "$cl" ] && read -r p_pid p_st <"$d/pid" 2>/dev/null; then
  { sed "s/^v1 - - /v1 $p_pid $p_st /" "$cl" >"$cl.tmp" && chmod 0644 "$cl.tmp" && mv -f "$cl.tmp" "$cl"; } 2>/dev/null
fi`

// cmpUser is a user name fit for a claim's one-word field.
func cmpUser(u string) string {
	if u == "" || strings.ContainsAny(u, " \t\n") {
		return "-"
	}
	return u
}
