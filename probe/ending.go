package probe

import (
	"context"

	"github.com/gssh/gssh/sshexec"
)

// runEnding runs cmd (which reads no stdin) on host so that it ends
// there once its session ends (sshexec.EndWithSession): a probe cut at
// its deadline by an nvidia-smi or NVML hung on a stuck GPU leaves
// nothing behind to hold one of the host's sessions.
func runEnding(ctx context.Context, run Runner, host, cmd string) (sshexec.Result, error) {
	stdin, release := sshexec.HeldStdin()
	defer release()
	return run.Run(ctx, host, sshexec.EndWithSession(cmd), stdin)
}
