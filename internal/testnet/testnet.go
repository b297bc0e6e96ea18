// Package testnet hands out network slots to tests that run side by side on one machine, in
// one test process or several (go test runs each package as a process of its own): a slot is a
// /24 of its own, and names derived from its number (a bridge, namespace prefixes, a
// directory). A slot is held by an flock(2) on a file under Dir, so it is free again as soon as
// its test releases it, or as soon as its process dies (a killed run leaves no slot taken), and
// the numbers cannot run out while tests keep releasing what they took.
//
// The /24s lie in 10.200.0.0-10.255.255.0, outside the subnets hale and its scripts use by
// default (local.DefaultSubnet 10.222.0.0/16, scripts/testhosts.sh's 10.223.0.0/24), so a
// person's demo or test bed on the same machine never shares an address with a test.
package testnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// Dir holds the slots' lock files. It is on /run (a tmpfs), so a machine restart frees them all.
const Dir = "/run/hale-testnet"

// Slots is how many slots there are: 54 second octets (200-255 without 222 and 223) of 256
// /24s each.
const Slots = 54 * 256

// Slot is one claimed network slot.
type Slot struct {
	// N is the slot's number, 0 <= N < Slots; names derived from it are unique on the machine
	// while the slot is held.
	N int
	// Net is the /24's first three octets ("10.201.7"); the gateway is Net+".1".
	Net  string
	lock *os.File
}

// Subnet is the slot's /24 in CIDR form ("10.201.7.0/24").
func (s *Slot) Subnet() string { return s.Net + ".0/24" }

// Name is prefix followed by the slot's number: a name no other holder of a slot uses. Linux
// interface names hold 15 bytes, so a bridge's prefix should be at most 10.
func (s *Slot) Name(prefix string) string { return fmt.Sprintf("%s%d", prefix, s.N) }

// Release frees the slot. Whatever the holder made with its names must be gone first.
func (s *Slot) Release() error {
	if s.lock == nil {
		return nil
	}
	// LOCK_UN, not Close alone: a child forked meanwhile would hold the lock with its copy of
	// the descriptor until it executes its program.
	syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
	err := s.lock.Close()
	s.lock = nil
	return err
}

// next is where the process's next search for a free slot starts: round robin, so a slot just
// released (whose bridge a slow clean-up may still be removing) is the last to be taken again.
var (
	mu   sync.Mutex
	next int
	// lockDir is Dir; the package's tests point it at a directory of their own.
	lockDir = Dir
)

// net returns the /24 of slot n.
func net(n int) string {
	second := 200 + n/256
	if second >= 222 { // 10.222 is hale's default node subnet, 10.223 the test bed's default
		second += 2
	}
	return fmt.Sprintf("10.%d.%d", second, n%256)
}

// Claim takes a free slot. Errors: Dir cannot be made (not root), or every slot is held.
func Claim() (*Slot, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range Slots {
		n := (next + i) % Slots
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		// flock locks belong to the open file description: two opens in one process exclude each
		// other as two processes do.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, err
		}
		next = n + 1
		return &Slot{N: n, Net: net(n), lock: f}, nil
	}
	return nil, fmt.Errorf("testnet: all %d slots are held", Slots)
}

// ClaimT claims a slot for a test or benchmark and releases it when t ends, after the clean-ups
// registered later (which remove what the test made with the slot's names) have run.
func ClaimT(t testing.TB) *Slot {
	t.Helper()
	s, err := Claim()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release() })
	return s
}
