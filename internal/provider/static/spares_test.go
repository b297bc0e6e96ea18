package static

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/haleproject/hale/internal/provider"
)

// fakeProvider is a provider over a pool of n fake hosts, closed at the test's end; cfg, when
// given, changes its configuration first.
func fakeProvider(t *testing.T, n int, cfg func(*Config)) (*fakePool, *Provider) {
	t.Helper()
	w := newFakePool(t, n)
	c := w.config(t.TempDir())
	if cfg != nil {
		cfg(&c)
	}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return w, p
}

// launchSpec is a worker's launch spec.
func launchSpec(logicalID string) provider.LaunchSpec {
	return provider.LaunchSpec{InstanceID: provider.NewInstanceID(), ClusterID: "c", ClusterName: "own", GroupName: "workers",
		LogicalID: logicalID, InstanceType: "ml.c5.xlarge", AgentToken: "token"}
}

// launched launches a worker, failing the test if it cannot, and terminates it at the test's
// end.
func launched(t *testing.T, p *Provider, logicalID string) *provider.Instance {
	t.Helper()
	ctx := context.Background()
	inst, err := p.Launch(ctx, launchSpec(logicalID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Terminate(ctx, inst.ID) })
	return inst
}

// hostState is the pool's entry of the host at address.
func hostState(t *testing.T, p *Provider, address string) HostStatus {
	t.Helper()
	for _, hs := range p.Hosts() {
		if hs.Address == address {
			return hs
		}
	}
	t.Fatalf("no host %s in the pool", address)
	return HostStatus{}
}

// TestSparesAndQuarantine: a pool whose hosts are all in use says what the group misses; a
// host whose instance was quarantined at its termination stays out of the pool, cleaned, with
// the evidence, until an operator returns it; then it serves a launch again.
func TestSparesAndQuarantine(t *testing.T) {
	ctx := context.Background()
	w, p := fakeProvider(t, 2, nil)
	a := launched(t, p, "workers-1")
	launched(t, p, "workers-2")
	var short *ShortfallError
	if _, err := p.Launch(ctx, launchSpec("workers-3")); !errors.As(err, &short) || short.InUse != 2 || short.Missing != 1 {
		t.Fatalf("a launch on a pool in use: %v, want a shortfall of 1 with 2 hosts in use", err)
	}
	if hs := hostState(t, p, a.IP); hs.State != InUse || hs.InstanceID != a.ID || hs.Hostname != "fake-host-1" || hs.LogicalID != "workers-1" {
		t.Errorf("the host of %s: %+v", a.ID, hs)
	}

	if err := p.Quarantine(a.ID, "Xid 79"); err != nil {
		t.Fatal(err)
	}
	if err := p.Quarantine("i-unknown", "Xid 79"); err != nil {
		t.Errorf("quarantine of an unknown instance: %v", err)
	}
	if err := p.Terminate(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if hs := hostState(t, p, a.IP); hs.State != Quarantined || hs.Reason != "Xid 79" || hs.InstanceID != "" {
		t.Errorf("the host of a quarantined instance: %+v, want Quarantined with the evidence", hs)
	}
	if w.hosts[0].setUp() {
		t.Errorf("a quarantined host keeps hale's agent or files")
	}
	if _, err := p.Launch(ctx, launchSpec("workers-3")); !errors.As(err, &short) || short.Excluded != 1 || short.InUse != 1 {
		t.Fatalf("a launch with one host quarantined, one in use: %v", err)
	}

	if hs, err := p.Return(a.IP); err != nil || hs.State != Available || !strings.Contains(hs.Reason, "Xid 79") {
		t.Fatalf("return the quarantined host: %+v, %v", hs, err)
	}
	c := launched(t, p, "workers-3")
	if c.IP != a.IP {
		t.Errorf("the returned host %s did not serve the launch; %s did", a.IP, c.IP)
	}

	// hale exec logs in as the provider does.
	argv, err := SSHCommand(p.cfg.Root, c.ID, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-p", strconv.Itoa(w.hosts[0].port), "-i", w.key, "UserKnownHostsFile=" + w.knownHosts, "root@" + a.IP} {
		if !slices.Contains(argv, want) {
			t.Errorf("hale exec's command %q lacks %q", argv, want)
		}
	}
	if _, err := SSHCommand(p.cfg.Root, a.ID, nil); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("SSHCommand of a terminated instance: %v", err)
	}

	// An injected kernel message lands in the host's kernel log.
	if err := p.InjectKernelLog(ctx, c.ID, []string{"NVRM: Xid 79", "second"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(w.hosts[0].path("/dev/kmsg")); string(b) != "NVRM: Xid 79\nsecond\n" {
		t.Errorf("the host's kernel log: %q", b)
	}
	if p.Gateway() != "127.0.0.1" {
		t.Errorf("Gateway %q, want the agents' address", p.Gateway())
	}
}

// TestHostKeys: a host known_hosts does not name is refused unless new keys are accepted (and
// the launch moves on to the next host); a host that answers a reboot with another key is held
// for an operator (IdentityProblem, naming both keys) and its reboot ends once the operator
// accepted the new key.
func TestHostKeys(t *testing.T) {
	ctx := context.Background()
	w, p := fakeProvider(t, 2, func(c *Config) { c.AcceptNewHostKeys = false })
	// known_hosts names the second host only.
	h2 := w.hosts[1]
	line := knownHostsLine(h2)
	if err := os.WriteFile(w.knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	a := launched(t, p, "workers-1")
	if a.IP != h2.addr {
		t.Fatalf("the launch went to %s, want %s (the first host is unknown)", a.IP, h2.addr)
	}
	if hs := hostState(t, p, w.hosts[0].addr); hs.State != Unreachable || !strings.Contains(hs.Reason, "is not in "+w.knownHosts) {
		t.Errorf("the unknown host: %+v, want Unreachable naming known_hosts", hs)
	}

	// A reboot answered with another key waits for the operator.
	h2.rekey()
	// The reboot runs beside the test; whatever becomes of the test, it ends before the
	// provider and the hosts do (it logs to the test).
	rctx, cancel := context.WithCancel(ctx)
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		done <- p.Reboot(rctx, a.ID)
	}()
	t.Cleanup(func() { cancel(); <-ended })
	deadline := time.Now().Add(30 * time.Second)
	for p.IdentityProblem(a.ID) == "" {
		select {
		case err := <-done:
			t.Fatalf("the reboot ended (%v) with the host's key changed", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no identity problem after the host came back with another key")
		}
	}
	why := p.IdentityProblem(a.ID)
	if !strings.Contains(why, ssh.FingerprintSHA256(h2.publicKey())) || !strings.Contains(why, "does not match") {
		t.Errorf("IdentityProblem %q does not name the presented key", why)
	}
	// The operator accepts the new key.
	if err := os.WriteFile(w.knownHosts, []byte(knownHostsLine(h2)), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the reboot after the new key was accepted: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reboot did not end after the new key was accepted")
	}
	if p.IdentityProblem(a.ID) != "" {
		t.Errorf("the identity problem stays after the reboot: %s", p.IdentityProblem(a.ID))
	}
	// The reboot started the agent; its process may take a moment to be there (the supervising
	// loop starts it), longer on a loaded machine.
	var ok bool
	var err error
	for end := time.Now().Add(15 * time.Second); !ok && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ok, err = p.AgentRunning(ctx, a.ID)
	}
	if err != nil || !ok {
		t.Errorf("the agent 15 s after the reboot: %v, %v", ok, err)
	}
}

// knownHostsLine is h's known_hosts line, with its present key.
func knownHostsLine(h *fakeHost) string {
	return "[" + h.addr + "]:" + strconv.Itoa(h.port) + " " + string(ssh.MarshalAuthorizedKey(h.publicKey()))
}

// TestRebootTimeout: a host that does not come back within RebootTimeout fails the reboot, and
// the pool says why.
func TestRebootTimeout(t *testing.T) {
	ctx := context.Background()
	w, p := fakeProvider(t, 1, func(c *Config) { c.RebootTimeout = 2 * time.Second })
	a := launched(t, p, "workers-1")
	// The host ignores reboot.
	if err := os.WriteFile(filepath.Join(w.hosts[0].dir, "bin", "reboot"), []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Reboot(ctx, a.ID); err == nil || !strings.Contains(err.Error(), "did not come back within 2s") {
		t.Fatalf("a reboot that never happened: %v", err)
	}
	if hs := hostState(t, p, a.IP); !strings.Contains(hs.Reason, "did not come back") {
		t.Errorf("the pool's entry: %+v", hs)
	}
}

// TestInstallStack: an Eks host gets the node stack and the images, once per content.
func TestInstallStack(t *testing.T) {
	stack, images := t.TempDir(), t.TempDir()
	for _, f := range nodeStackFiles {
		if f == "cni" {
			os.MkdirAll(filepath.Join(stack, f), 0o755)
			os.WriteFile(filepath.Join(stack, f, "bridge"), []byte("bridge"), 0o755)
			continue
		}
		os.WriteFile(filepath.Join(stack, f), []byte(f), 0o755)
	}
	os.WriteFile(filepath.Join(images, "pause.tar"), []byte("pause"), 0o644)
	w, p := fakeProvider(t, 1, func(c *Config) { c.NodeStack, c.NodeImages = stack, images })
	h := &p.cfg.Inventory.Hosts[0]
	for range 2 {
		if err := p.installStack(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	fh := w.hosts[0]
	if b, _ := os.ReadFile(fh.path("/opt/hale/k8s/cni/bridge")); string(b) != "bridge" {
		t.Errorf("the host's cni/bridge: %q", b)
	}
	if b, _ := os.ReadFile(fh.path("/opt/hale/images/pause.tar")); string(b) != "pause" {
		t.Errorf("the host's pause.tar: %q", b)
	}
	if args := p.agentArgs(p.layout(h), provider.LaunchSpec{Containers: true}, false); !slices.Contains(args, "--device-plugin-dir") {
		t.Errorf("an Eks node's agent is not the device plugin: %q", args)
	}
}
