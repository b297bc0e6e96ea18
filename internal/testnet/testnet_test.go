package testnet

import (
	"os/exec"
	"strings"
	"testing"
)

func TestSlotsAreDistinctAndAvoidHalesDefaults(t *testing.T) {
	seen := map[string]int{}
	for n := range Slots {
		s := net(n)
		if strings.HasPrefix(s, "10.222.") || strings.HasPrefix(s, "10.223.") {
			t.Fatalf("slot %d is %s, a subnet hale's defaults use", n, s)
		}
		if m, ok := seen[s]; ok {
			t.Fatalf("slots %d and %d are both %s", m, n, s)
		}
		seen[s] = n
	}
	if got := net(Slots - 1); got != "10.255.255" {
		t.Fatalf("the last slot is %s, want 10.255.255", got)
	}
}

func TestClaimExcludesUntilRelease(t *testing.T) {
	lockDir = t.TempDir()
	a, err := Claim()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Claim()
	if err != nil {
		t.Fatal(err)
	}
	if a.N == b.N {
		t.Fatalf("two holders of slot %d", a.N)
	}
	if a.Subnet() != a.Net+".0/24" || a.Name("br") == b.Name("br") {
		t.Fatalf("slots %+v and %+v", a, b)
	}
	// Another process sees both held: it cannot take their locks.
	for _, s := range []*Slot{a, b} {
		if exec.Command("flock", "-n", lockDir+"/"+s.Name("")+".lock", "true").Run() == nil {
			t.Fatalf("another process took held slot %d", s.N)
		}
	}
	a.Release()
	if exec.Command("flock", "-n", lockDir+"/"+a.Name("")+".lock", "true").Run() != nil {
		t.Fatalf("slot %d is still held after Release", a.N)
	}
	b.Release()
}
