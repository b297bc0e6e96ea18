package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/provider"
)

// A node on the host's root (no image built), set up from the setup.json the provider writes
// for it (prepareDirs): its /etc and /var/lib are overlays whose writes stay in the instance's
// layers, its node directories (/var/log, /opt/sagemaker_cluster, ...) and the cluster's /fsx
// exist inside it only, its disk is a tmpfs, its /dev is its own; the host is unchanged.
func TestHostRootNode(t *testing.T) {
	p := startProvider(t)
	const id = "i-0123456789abcdef0"
	r, err := p.newRecord(provider.LaunchSpec{InstanceID: id, ClusterID: "c-1", ClusterName: "hostroot", GroupName: "workers",
		LogicalID: "workers-1", InstanceType: "ml.c5.xlarge", Mounts: []provider.Mount{{Shared: true, Name: "fs-1", Path: "/fsx"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.prepareDirs(r); err != nil {
		t.Fatal(err)
	}
	if err := p.writeHosts(r.ClusterID); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/fsx", ClusterMarker, "/etc/hale-host-root-test"} {
		if _, err := os.Lstat(path); err == nil {
			t.Skipf("the host has %s: this test checks that a node's does not reach the host", path)
		}
	}
	hostFile := filepath.Join(t.TempDir(), "host-only")
	os.WriteFile(hostFile, nil, 0o644)
	v := runNode(t, filepath.Join(p.dir(id), "setup.json"), hostFile, "hostroot",
		"set -e; echo node > /etc/hale-host-root-test; echo shared > /fsx/from-node; test -d "+ClusterMarker+" && echo marker; "+
			"echo line >> "+NodeKernelLog+"; stat -f -c %T "+NodeDisk+"; stat -f -c %T /etc; grep -c "+r.Hostname+" /etc/hosts")
	if v.Hostname != r.Hostname {
		t.Errorf("hostname %q, want %q", v.Hostname, r.Hostname)
	}
	if !v.HostFile {
		t.Error("a node on the host's root does not see the host's files")
	}
	if got := strings.Fields(v.Command); strings.Join(got, " ") != "marker tmpfs overlayfs 1" {
		t.Errorf("inside the node: %q; want the cluster marker, a tmpfs disk, an overlay /etc and the node in the cluster's /etc/hosts", v.Command)
	}
	dev := " " + strings.Join(v.Dev, " ") + " "
	for _, want := range []string{"null", "zero", "urandom"} {
		if !strings.Contains(dev, " "+want+" ") {
			t.Errorf("the node's /dev lacks %s: %v", want, v.Dev)
		}
	}
	// The node's writes are its own.
	if b, err := os.ReadFile(filepath.Join(p.dir(id), "layers", "etc", "upper", "hale-host-root-test")); err != nil || string(b) != "node\n" {
		t.Errorf("the node's /etc write in its layer: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(p.sharedDir("c-1", "fs-1"), "from-node")); err != nil || string(b) != "shared\n" {
		t.Errorf("the cluster's shared /fsx: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(p.dir(id), "root", NodeKernelLog)); err != nil || string(b) != "line\n" {
		t.Errorf("the node's kernel log: %q, %v", b, err)
	}
	for _, path := range []string{"/fsx", ClusterMarker, "/etc/hale-host-root-test"} {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("the node's %s is on the host", path)
		}
	}
}
