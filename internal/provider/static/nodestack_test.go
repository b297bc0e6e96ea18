package static

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/provider"
)

// A host's pod routes are the other instances' CIDRs through their addresses; the script also
// removes hale's routes (proto 186) that are no longer wanted, and only those.
func TestRouteScript(t *testing.T) {
	routes := []provider.PodRoute{{InstanceID: "i-1", CIDR: "10.244.0.0/24", Via: "10.0.0.11"}, {InstanceID: "i-2", CIDR: "10.244.1.0/24", Via: "10.0.0.12"}}
	s := routeScript("i-1", routes)
	if strings.Contains(s, "10.244.0.0/24 via") || !strings.Contains(s, "ip route replace '10.244.1.0/24' via '10.0.0.12' proto 186") {
		t.Errorf("the script of i-1 routes its own CIDR or not the other's:\n%s", s)
	}
	// The removal loop, run by sh against a stand-in ip that lists two routes of hale's.
	dir := t.TempDir()
	fake := "#!/bin/sh\nif [ \"$2\" = show ]; then printf '10.244.1.0/24 via 10.0.0.12 dev eth0\\n10.244.7.0/24 via 10.0.0.19 dev eth0\\n'; else echo \"$*\" >> " + dir + "/calls; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "ip"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", s)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	want := "route del 10.244.7.0/24 proto 186\nroute replace 10.244.1.0/24 via 10.0.0.12 proto 186\n"
	if string(calls) != want {
		t.Errorf("ip was called:\n%s\nwant:\n%s", calls, want)
	}
}

// The node stack's tree is copied through its links (bin/k8s links into a cache), directories
// and all, and a changed file changes its fingerprint.
func TestStackTreeTarAndFingerprint(t *testing.T) {
	cache, stack := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(cache, "cni"), 0o755)
	os.WriteFile(filepath.Join(cache, "kubelet"), []byte("kubelet"), 0o755)
	os.WriteFile(filepath.Join(cache, "cni", "bridge"), []byte("bridge"), 0o755)
	for _, f := range []string{"kubelet", "cni"} {
		if err := os.Symlink(filepath.Join(cache, f), filepath.Join(stack, f)); err != nil {
			t.Fatal(err)
		}
	}
	tree := copyTree{src: stack, dst: "/opt/hale/k8s", files: []string{"kubelet", "cni"}}
	var buf bytes.Buffer
	if err := tree.writeTar(&buf); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if got["kubelet"] != "kubelet" || got["cni/bridge"] != "bridge" || len(got) != 3 {
		t.Errorf("tar entries %v, want kubelet, cni/ and cni/bridge with their contents", got)
	}
	before, err := tree.fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cache, "cni", "bridge"), []byte("bridge, rebuilt"), 0o755)
	if after, _ := tree.fingerprint(); after == before {
		t.Error("a rebuilt plugin did not change the fingerprint: the hosts would keep the old one")
	}
}

// A server without the node stack refuses an Eks node's launch with what to do.
func TestStackTreesNeedTheNodeStack(t *testing.T) {
	p := &Provider{}
	if _, err := p.stackTrees(layout{}); err == nil || !strings.Contains(err.Error(), "--kubelets real") {
		t.Errorf("stackTrees without a node stack: %v", err)
	}
}
