package static

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/provider"
)

// newPool is a provider over an inventory without SSH: only the pool's bookkeeping is used.
func newPool(t *testing.T, hosts ...Host) *Provider {
	t.Helper()
	p := &Provider{cfg: Config{Root: t.TempDir(), Inventory: &Inventory{Hosts: hosts}}, short: map[string]map[string]bool{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.load(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolReserve: a launch takes the first Available host of its instance type (or of none),
// a second launch of the same instance keeps its host, and a pool without one says how many
// hosts of which type the group misses, counting each instance once.
func TestPoolReserve(t *testing.T) {
	p := newPool(t,
		Host{Address: "10.0.0.1", InstanceType: "ml.p5.48xlarge"},
		Host{Address: "10.0.0.2", InstanceType: "ml.c5.xlarge"},
		Host{Address: "10.0.0.3"})
	spec := func(id string) provider.LaunchSpec {
		return provider.LaunchSpec{InstanceID: id, ClusterID: "c", ClusterName: "own", GroupName: "workers", LogicalID: "workers-" + id, InstanceType: "ml.c5.xlarge"}
	}
	hs, err := p.reserve(spec("i-1"))
	if err != nil || hs.Address != "10.0.0.2" || hs.State != InUse || hs.InstanceID != "i-1" {
		t.Fatalf("first launch took %+v, %v; want 10.0.0.2 InUse", hs, err)
	}
	if again, _ := p.reserve(spec("i-1")); again.Address != "10.0.0.2" {
		t.Fatalf("a launch of i-1 again took %s, want the host it holds", again.Address)
	}
	if hs, _ := p.reserve(spec("i-2")); hs.Address != "10.0.0.3" {
		t.Fatalf("second launch took %s, want the host without a type", hs.Address)
	}
	for _, id := range []string{"i-3", "i-4", "i-3"} {
		_, err = p.reserve(spec(id))
	}
	var short *ShortfallError
	if !errors.As(err, &short) || short.Missing != 2 || short.InUse != 2 || short.Total != 2 {
		t.Fatalf("err = %v; want 2 missing of a 2-host type, both in use", err)
	}
	if !strings.Contains(err.Error(), "short of 2 host(s) of type ml.c5.xlarge for instance group workers") {
		t.Errorf("message: %v", err)
	}
	// The state is on disk: a new provider over the same root sees it.
	q := &Provider{cfg: p.cfg, short: map[string]map[string]bool{}}
	q.mu.Lock()
	if err := q.load(); err != nil {
		t.Fatal(err)
	}
	q.mu.Unlock()
	if got := q.st.Hosts["10.0.0.2"]; got.State != InUse || got.InstanceID != "i-1" {
		t.Errorf("after a reload 10.0.0.2 is %+v", got)
	}
}

// TestPoolReturn: only a Quarantined or Unreachable host is returned; an InUse one is refused
// naming its node, an unknown one is not found.
func TestPoolReturn(t *testing.T) {
	p := newPool(t, Host{Address: "10.0.0.1"}, Host{Address: "10.0.0.2"})
	p.reserve(provider.LaunchSpec{InstanceID: "i-1", ClusterID: "c", ClusterName: "own", GroupName: "g", LogicalID: "g-1", InstanceType: "ml.c5.xlarge"})
	if _, err := p.Return("10.0.0.1"); !errors.Is(err, ErrHostInUse) || !strings.Contains(err.Error(), "g-1") {
		t.Errorf("return of an InUse host: %v", err)
	}
	if _, err := p.Return("10.9.9.9"); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("return of an unknown host: %v", err)
	}
	p.mu.Lock()
	p.setHost(p.st.Hosts["10.0.0.2"], Quarantined, "Xid 79")
	p.mu.Unlock()
	hs, err := p.Return("10.0.0.2")
	if err != nil || hs.State != Available || !strings.Contains(hs.Reason, "Xid 79") {
		t.Errorf("return of a quarantined host: %+v, %v", hs, err)
	}
}

// TestSSHCommandKeepsArguments: hale exec's command line for a static host carries each
// argument through the remote shell as it was (ssh joins its arguments with spaces for that
// shell): sh -c 'echo one; echo two' prints both lines, a --wrap string stays one argument.
// The remote shell is played here by sh -c on the last argument, as sshd runs it.
func TestSSHCommandKeepsArguments(t *testing.T) {
	p := newPool(t, Host{Address: "10.0.0.1"})
	if _, err := p.reserve(provider.LaunchSpec{InstanceID: "i-1", ClusterID: "c", ClusterName: "own", GroupName: "g", LogicalID: "g-1", InstanceType: "ml.c5.xlarge"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sh", "-c", "echo one; echo two"}, "one\ntwo\n"},
		{[]string{"printf", "%s|", "--wrap", "srun sleep 300", "it's", `a "b" $HOME`}, `--wrap|srun sleep 300|it's|a "b" $HOME|`},
	} {
		argv, err := SSHCommand(p.cfg.Root, "i-1", tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if argv[len(argv)-2] != "--" {
			t.Fatalf("argv %q: want the remote command after --", argv)
		}
		out, err := exec.Command("sh", "-c", argv[len(argv)-1]).Output()
		if err != nil || string(out) != tc.want {
			t.Errorf("%q through the remote shell printed %q (%v), want %q", tc.args, out, err, tc.want)
		}
	}
	if argv, _ := SSHCommand(p.cfg.Root, "i-1", nil); argv[len(argv)-1] != "root@10.0.0.1" || !slices.Contains(argv, "-t") {
		t.Errorf("no command: %q, want a login shell on a terminal", argv)
	}
}
