package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/serve"
)

// ErrUnknownPeer wraps gssh serve's refusal of a request whose peer is
// no user it acts for: a uid with no account (no passwd entry), or, in
// personal mode, another uid than its own.
var ErrUnknownPeer = errors.New("gssh serve refused the request")

// PeerUser is the user a gssh serve of l acts for in a request of p
// (SO_PEERCRED's uid, never a claim of the request): in personal mode
// l's own user, for its own uid alone, and over the HTTP API a token's
// user the policy lists (a guest: see CreateToken); in a shared lab the pass user for
// the pass account's uid, else the account of p's uid as this host's
// name service says (getent passwd, so that LDAP and sssd accounts are
// found). Errors wrap ErrUnknownPeer.
func (l *Local) PeerUser(p serve.Peer) (string, error) {
	if p.User != "" { // the HTTP API's token's: checked there
		if l.lab == nil && p.User != l.opt.User {
			// A guest of the owner's (CreateToken): one the policy lists.
			f, err := l.hosts()
			if err != nil {
				return "", err
			}
			if _, ok := f.Inventory().Policy.Plan.Users[p.User]; !ok {
				return "", fmt.Errorf("%w: this gssh serve keeps %s's own queue, and the request is %s's, whom the inventory's `policy: users:` does not list", ErrUnknownPeer, l.opt.User, p.User)
			}
		}
		return p.User, nil
	}
	if l.lab == nil {
		if p.UID != os.Geteuid() {
			return "", fmt.Errorf("%w: this gssh serve keeps uid %d's own queue, and the request came from uid %d", ErrUnknownPeer, os.Geteuid(), p.UID)
		}
		return l.opt.User, nil
	}
	if p.UID == l.lab.dir.PassUID {
		return l.lab.passUser, nil
	}
	name, err := l.peers.lookup(p.UID, l.opt.Now())
	if err != nil {
		return "", fmt.Errorf("%w: uid %d (pid %d) %v, and the lab's queue acts only for accounts", ErrUnknownPeer, p.UID, p.PID, err)
	}
	return name, nil
}

// accountOf is the name of uid's account: `getent passwd UID` (the name
// service switch: files, LDAP, sssd), or this host's /etc/passwd where
// there is no getent. An error says why there is none.
func accountOf(uid int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "getent", "passwd", strconv.Itoa(uid))
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		u, err := user.LookupId(strconv.Itoa(uid))
		if err != nil {
			return "", errors.New("has no account (no passwd entry)")
		}
		return u.Username, nil
	case errors.As(err, &ee) && ee.ExitCode() == 2: // getent(1): key not found
		return "", errors.New("has no account (getent passwd finds none)")
	case err != nil:
		return "", fmt.Errorf("cannot be looked up (getent passwd: %v %s)", err, strings.TrimSpace(errb.String()))
	}
	name, rest, ok := strings.Cut(strings.TrimSpace(out.String()), ":")
	if !ok || name == "" || !strings.Contains(rest, ":"+strconv.Itoa(uid)+":") {
		return "", fmt.Errorf("cannot be looked up (getent passwd said %q)", out.String())
	}
	return name, nil
}

// peerCache is the accounts of the uids gssh serve's requests came from,
// as accountOf found them at most peerTTL ago: a burst of one member's
// requests is one lookup. A uid with no account is looked up again each
// time (one made since counts at once).
type peerCache struct {
	mu    sync.Mutex
	names map[int]peerName
}

type peerName struct {
	name string
	at   time.Time
}

// peerTTL is how long a uid's account name is trusted once found: a
// renamed or removed account is seen that much later at most.
const peerTTL = time.Minute

func (c *peerCache) lookup(uid int, now time.Time) (string, error) {
	c.mu.Lock()
	if n, ok := c.names[uid]; ok && now.Sub(n.at) < peerTTL {
		c.mu.Unlock()
		return n.name, nil
	}
	c.mu.Unlock()
	name, err := accountOf(uid)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.names == nil || len(c.names) > 4096 {
		c.names = map[int]peerName{}
	}
	c.names[uid] = peerName{name, now}
	c.mu.Unlock()
	return name, nil
}
