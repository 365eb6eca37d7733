package jobform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gssh/gssh/job"
)

// sessionVars describe the submitting session, not the job: --export ALL
// leaves them out (name them to pass one anyway).
var sessionVars = map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true, "OLDPWD": true, "SHLVL": true,
	"_": true, "TERM": true, "DISPLAY": true, "MAIL": true, "HOSTNAME": true, "TMUX": true, "TMUX_PANE": true, "STY": true, "WINDOWID": true,
	"SSH_AUTH_SOCK": true, "SSH_AGENT_PID": true, "SSH_CLIENT": true, "SSH_CONNECTION": true, "SSH_TTY": true, "PS1": true, "PROMPT_COMMAND": true}

// ExportEnv is --export (its name: name) over environ (KEY=VALUE lines): NONE, ALL (every
// variable but gssh's own, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, the
// session's (sessionVars, XDG_*) and names a shell cannot export), or a
// list of VAR (from environ; one not set is a warning) and VAR=value;
// ALL may be part of the list, as in Slurm.
func ExportEnv(name, spec string, environ []string, warn func(string)) ([]job.EnvVar, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || strings.EqualFold(spec, "NONE") {
		return nil, nil
	}
	env := map[string]string{}
	var order []string
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup {
				order = append(order, k)
			}
			env[k] = v
		}
	}
	var out []job.EnvVar
	set := func(k, v string) {
		if i := slices.IndexFunc(out, func(e job.EnvVar) bool { return e.Key == k }); i >= 0 {
			out[i].Value = v
			return
		}
		out = append(out, job.EnvVar{Key: k, Value: v})
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		k, v, hasValue := strings.Cut(item, "=")
		switch {
		case strings.EqualFold(item, "ALL"):
			for _, k := range order {
				if sessionVars[k] || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "GSSH_") || k == "CUDA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER" || !shellName(k) {
					continue
				}
				set(k, env[k])
			}
		case strings.EqualFold(item, "NONE"):
			return nil, fmt.Errorf("%s %q: NONE stands alone (the default); give ALL or names", name, spec)
		case !shellName(k):
			return nil, fmt.Errorf("%s %q: %q is not a variable name (letters, digits and _, not starting with a digit)", name, spec, k)
		case strings.HasPrefix(k, "GSSH_") || k == "CUDA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER":
			return nil, fmt.Errorf("%s %q: gssh sets %s itself", name, spec, k)
		case hasValue:
			set(k, v)
		default:
			val, ok := env[k]
			if !ok {
				warn(fmt.Sprintf("%s %s: %s is not set here: the job gets no %s", name, spec, k, k))
				continue
			}
			set(k, val)
		}
	}
	return out, nil
}

// shellName reports whether k is a name sh can export.
func shellName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
