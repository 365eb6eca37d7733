// Package sshconfig resolves a host name through OpenSSH client configuration
// files (~/.ssh/config, /etc/ssh/ssh_config) with OpenSSH's own meaning, as
// `ssh -G HOST` of OpenSSH 9.2 prints it, for the keys gssh uses (Settings).
//
// It has its own small parser, which splits lines as OpenSSH does (quotes,
// escapes, Key=Value, trailing comments), reads Include files once at load
// time, and evaluates Host and Match blocks per host: first value obtained
// wins, IdentityFile accumulates, Host patterns compare case-sensitively with
// the name as written, Match host and originalhost case-insensitively, a Match
// final line makes OpenSSH's second pass, and ProxyJump hops are resolved as
// the `ssh -J … -W` commands OpenSSH runs for them would resolve them.
// (github.com/kevinburke/ssh_config v1.6.0 was not used: it reads Include
// files through the process's home directory, fails whole files on Match
// forms it does not know, and expands no tokens.)
//
// Known differences from OpenSSH:
//
//   - Match exec: gssh runs no command; a Match line with exec never applies
//     (OpenSSH runs it and uses its exit status), with one Warning per line.
//     Other criteria gssh does not evaluate (localnetwork, tagged, newer ones)
//     behave the same way.
//   - A line OpenSSH rejects (bad value, malformed Host or Match line) makes
//     OpenSSH refuse the whole configuration. Here it is a Warning; a bad
//     value makes Resolve fail only for hosts the line applies to, and a
//     malformed Host or Match line starts a block that never applies.
//     Keywords gssh does not use are ignored; keywords OpenSSH does not know
//     either (a typo such as `Prot`) are ignored with a warning, unless
//     IgnoreUnknown lists them.
//   - CanonicalizeHostname is not implemented (as if "no"): no DNS look-up;
//     Match canonical holds only in the second pass that Match final makes.
//   - Port takes numbers only (OpenSSH also takes /etc/services names).
//   - ~user is expanded only for Env.LocalUser; ${VAR} is not expanded; the
//     tokens %i, %j and %T are errors. %C is OpenSSH 9.2's (SHA-1 of
//     %l%h%p%r); newer OpenSSH hashes %j too.
//   - Overrides.IdentityFile is kept when the file does not exist (ssh -i
//     drops it with a warning).
//   - No ownership or permission check of the files; a file over 1 MiB is
//     skipped with a Warning; an Include that comes back to a file being read
//     is skipped with a Warning (OpenSSH fails after 16 levels).
//   - Relative Include paths of the system file are taken under the system
//     file's directory (OpenSSH: always /etc/ssh, the same for the real file).
//   - A ProxyJump chain that crosses a host twice is an error (OpenSSH only
//     refuses a hop equal to its target in host, user and port).
package sshconfig
