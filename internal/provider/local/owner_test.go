package local

import (
	"os/exec"
	"testing"
)

// The root's lock is free as soon as its provider releases it, even while a child process holds
// a copy of the lock's descriptor: as a child forked by another goroutine does until it executes
// its program (seen in the parallel e2e suite: a test's clean-up found its own closed provider's
// root "used by another hale process"). The child here keeps the copy for its whole life.
func TestUnlockRootFreesTheLockAChildShares(t *testing.T) {
	root := t.TempDir()
	f, err := lockRoot(root, false)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "30")
	child.ExtraFiles = append(child.ExtraFiles, f) // the descriptor, as a fork's copy has it
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if err := unlockRoot(f); err != nil {
		t.Fatal(err)
	}
	if ownerAlive(root) {
		t.Fatal("the released root looks owned")
	}
	again, err := lockRoot(root, false)
	if err != nil {
		t.Fatalf("the root's lock after its release, with a child holding the descriptor: %v", err)
	}
	unlockRoot(again)
}

// Servers on one store share the root (Config.Shared): each takes the lock shared; a server
// that did not say so is still kept out, and the root looks owned while any of them lives.
func TestSharedRootKeepsOutAnExclusiveServer(t *testing.T) {
	root := t.TempDir()
	a, err := lockRoot(root, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lockRoot(root, true)
	if err != nil {
		t.Fatalf("a second server of the store: %v", err)
	}
	if _, err := lockRoot(root, false); err == nil {
		t.Fatal("a server that does not share the root got it while two servers share it")
	}
	unlockRoot(a)
	if !ownerAlive(root) {
		t.Fatal("the root looks unowned while a sharing server lives")
	}
	unlockRoot(b)
	if ownerAlive(root) {
		t.Fatal("the root looks owned after every sharing server left")
	}
}
