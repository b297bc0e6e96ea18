package local

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

var lookPath = exec.LookPath

// ip runs the iproute2 tool and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// deleteLink removes a link; one that vanishes meanwhile (a veth goes with its peer's
// namespace, asynchronously) is fine.
func deleteLink(name string) error {
	if !linkExists(name) {
		return nil
	}
	if err := ip("link", "del", "dev", name); err != nil && linkExists(name) {
		return err
	}
	return nil
}

// ensureBridge creates the bridge with the gateway address, if it is not there. A bridge (or
// subnet) another running hale server uses is refused: two servers on one bridge would give the
// same addresses and interface names to different nodes and tear down each other's network. A
// bridge whose owner is gone (its lock is free) is reclaimed with the namespaces on it.
func (p *Provider) ensureBridge() error {
	br := p.cfg.Bridge
	owner := "hale " + p.cfg.Root
	if linkExists(br) {
		b, _ := os.ReadFile(filepath.Join("/sys/class/net", br, "ifalias"))
		if a := strings.TrimSpace(string(b)); a != "" && a != owner {
			if root, ok := strings.CutPrefix(a, "hale "); !ok || ownerAlive(root) {
				return fmt.Errorf("local provider: bridge %s belongs to another hale server (%s); give this one its own --local-bridge and --local-subnet (and --agent-port)", br, a)
			}
			if err := p.reclaimBridge(a); err != nil {
				return err
			}
		}
	}
	if !linkExists(br) {
		out, _ := exec.Command("ip", "-o", "addr", "show", "to", p.gateway.String()+"/32").Output()
		if f := strings.Fields(string(out)); len(f) > 1 {
			return fmt.Errorf("local provider: %s (the gateway of --local-subnet %s) is already on interface %s; choose another --local-subnet", p.gateway, p.subnet, f[1])
		}
		if err := ip("link", "add", "name", br, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := ip("link", "set", "dev", br, "alias", owner); err != nil {
		return err
	}
	// A bridge takes the lowest MAC of its ports unless given one, so its MAC would change as
	// nodes come and go, and every node's ARP entry for the gateway (where the server is)
	// would go stale for seconds: the agents would miss heartbeats. A fixed, locally
	// administered MAC keeps it.
	g := p.gateway.As4()
	if err := ip("link", "set", "dev", br, "address", fmt.Sprintf("02:68:61:%02x:%02x:%02x", g[1], g[2], g[3])); err != nil {
		return err
	}
	addr := fmt.Sprintf("%s/%d", p.gateway, p.subnet.Bits())
	out, _ := exec.Command("ip", "-o", "addr", "show", "dev", br).Output()
	if !strings.Contains(string(out), " "+addr+" ") {
		if err := ip("addr", "add", addr, "dev", br); err != nil {
			return err
		}
	}
	return ip("link", "set", "dev", br, "up")
}

// ensureNetns creates the instance's network namespace and veth pair if missing: eth0 with the
// node's address inside, the host end on the bridge, no default route.
func (p *Provider) ensureNetns(r *record) error {
	if !netnsExists(r.Netns) {
		if err := ip("netns", "add", r.Netns); err != nil {
			return err
		}
	}
	if !linkExists(r.HostVeth) {
		if err := ip("link", "add", "name", r.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", r.Netns); err != nil {
			return err
		}
	}
	addr := fmt.Sprintf("%s/%d", r.IP, p.subnet.Bits())
	out, _ := exec.Command("ip", "-n", r.Netns, "-o", "addr", "show", "dev", "eth0").Output()
	if !strings.Contains(string(out), " "+addr+" ") {
		if err := ip("-n", r.Netns, "addr", "add", addr, "dev", "eth0"); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"-n", r.Netns, "link", "set", "dev", "lo", "up"},
		{"-n", r.Netns, "link", "set", "dev", "eth0", "up"},
		{"link", "set", "dev", r.HostVeth, "master", p.cfg.Bridge},
		{"link", "set", "dev", r.HostVeth, "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// deleteNetns removes the namespace (which takes the veth pair with it) and the host end if it
// survived.
func deleteNetns(ns, veth string) error {
	if netnsExists(ns) {
		if err := ip("netns", "del", ns); err != nil {
			return err
		}
	}
	return deleteLink(veth)
}

// netnsPIDs returns the processes in a network namespace.
func netnsPIDs(ns string) []int {
	if !netnsExists(ns) {
		return nil
	}
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}
