package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// lockRoot holds ROOT/provider.lock with a flock for the provider's lifetime: exclusive, or
// shared by the servers of one store (Config.Shared), which leadership orders instead. The
// bridge's alias names the root that owns it; the lock says whether that owner still lives. The
// kernel drops a flock when its process dies (even by SIGKILL or a machine restart), so a crash
// never leaves a live-looking owner behind.
func lockRoot(root string, shared bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(root, "provider.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("local provider: another hale process uses %s", root)
		}
		return nil, err
	}
	return f, nil
}

// unlockRoot releases the lock lockRoot took. LOCK_UN first: the lock belongs to the open file
// description, which a child forked meanwhile shares through its copy of the descriptor until it
// executes its program (Go closes descriptors at exec, not at fork); a plain Close would leave
// the lock held for that while, and a provider opened on the root at once (a server restarted
// in the same process, a test's clean-up) would be refused as if another hale process used it.
func unlockRoot(f *os.File) error {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}

// ownerAlive reports whether the provider rooted at root (from a bridge alias) still runs: it
// holds ROOT/provider.lock, or (servers from before that lock) DATA_DIR/server.lock of the data
// directory above it. A root that is gone has no owner.
func ownerAlive(root string) bool {
	for _, path := range []string{filepath.Join(root, "provider.lock"), filepath.Join(filepath.Dir(root), "server.lock")} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		// Our probe's lock, if we got it, is dropped at once (unlockRoot says why not by Close
		// alone): the owner starting again must not find it held.
		unlockRoot(f)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return true
		}
	}
	return false
}

var linkNetns = regexp.MustCompile(`link-netns (hale-\S+)`)

// reclaimBridge takes back a bridge whose owner died without cleaning up (a killed test run, a
// machine restart in the middle of a run): every node namespace still wired to it is emptied
// and removed, then the bridge itself. Only namespaces named hale-* are touched.
func (p *Provider) reclaimBridge(owner string) error {
	br := p.cfg.Bridge
	out, err := exec.Command("ip", "-o", "link", "show", "master", br).Output()
	if err != nil {
		return fmt.Errorf("local provider: list ports of %s: %w", br, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := linkNetns.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ns := m[1]
		if err := killNetns(context.Background(), ns); err != nil {
			return err
		}
		veth := ""
		if f := strings.Fields(line); len(f) > 1 {
			veth, _, _ = strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		}
		if err := deleteNetns(ns, veth); err != nil {
			return err
		}
		p.log.Warn("reclaimed a node namespace left by a hale server that is gone", "netns", ns, "owner", owner)
	}
	if err := deleteLink(br); err != nil {
		return err
	}
	p.log.Warn("reclaimed a bridge left by a hale server that is gone", "bridge", br, "owner", owner)
	return nil
}
