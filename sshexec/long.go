package sshexec

import "context"

type longKey struct{}

// LongSession marks the sessions opened with ctx as long ones: they may
// last as long as their command (a log followed, a GPU stream, a gssh
// run's job). A Pool gives them at most its session limit less a
// reserve, which stays for short commands (see gate).
func LongSession(ctx context.Context) context.Context {
	return context.WithValue(ctx, longKey{}, true)
}

// IsLong reports whether ctx marks its sessions long (LongSession).
func IsLong(ctx context.Context) bool {
	long, _ := ctx.Value(longKey{}).(bool)
	return long
}
