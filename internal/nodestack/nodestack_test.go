package nodestack

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The pause image reads back as upstream builds it: one layer with /pause, run by user 65535,
// tagged as containerd's sandbox image.
func TestPauseArchive(t *testing.T) {
	b, err := PauseArchive([]byte("\x7fELF pause"))
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(PauseImage)
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/pause" || cf.Config.User != "65535:65535" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config %+v", cf.Config)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v %v", layers, err)
	}
}

// Each node's files name the node: its kubeconfig's user is its Node's, and the kubelet's
// configuration is the one a cgroup v1 machine without systemd needs.
func TestFiles(t *testing.T) {
	n := Node{Name: "hyperpod-i-0123", IP: "10.200.0.10", ProviderID: "hale://i-0123"}
	files := Files(n, Credentials{Server: "https://10.200.0.1:6443", CA: []byte("ca")})
	kc := string(files[KubeletKubeconf].Content)
	if !strings.Contains(kc, "system:node:hyperpod-i-0123") || !strings.Contains(kc, `"https://10.200.0.1:6443"`) {
		t.Errorf("kubeconfig:\n%s", kc)
	}
	for _, want := range []string{"failCgroupV1: false", "cgroupDriver: cgroupfs", "cgroupRoot: /"} {
		if !strings.Contains(string(files[KubeletConfig].Content), want) {
			t.Errorf("kubelet config lacks %q", want)
		}
	}
	if files[PKIDir+"/kubelet.key"].Mode != 0o600 || files[KubeletKubeconf].Mode != 0o600 {
		t.Error("private keys and the kubeconfig must be 0600")
	}
	if argv := strings.Join(Kubelet(n).Argv, " "); !strings.Contains(argv, "--hostname-override hyperpod-i-0123 --node-ip 10.200.0.10 --provider-id hale://i-0123") {
		t.Errorf("kubelet %s", argv)
	}
}

// Pods' packets leaving the pod network get the node's address; pod-to-pod ones keep theirs.
func TestPodEgress(t *testing.T) {
	n := Node{Name: "hyperpod-i-0123", IP: "10.200.0.10", ProviderID: "hale://i-0123"}
	egress := string(Files(n, Credentials{ClusterCIDR: "10.244.0.0/16"})[PodEgress].Content)
	if !strings.Contains(egress, "ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade") {
		t.Errorf("the pod egress table does not masquerade what leaves 10.244.0.0/16:\n%s", egress)
	}
	// Loaded again (a restarted node), the table is replaced, not added to.
	if i, j := strings.Index(egress, "delete table ip hale-pod-egress"), strings.Index(egress, "table ip hale-pod-egress {"); i < 0 || j < i {
		t.Errorf("the pod egress table is not replaced when loaded again:\n%s", egress)
	}
}

// With a registry, containerd sends pulls of registry.hale.internal's images and of the
// registry's own address to it over plain HTTP; without one, no hosts file is written.
func TestRegistryHosts(t *testing.T) {
	n := Node{Name: "hyperpod-i-0123", IP: "10.200.0.10", ProviderID: "hale://i-0123"}
	files := Files(n, Credentials{Server: "https://10.200.0.1:6443", Registry: "10.200.0.1:5000"})
	for _, host := range []string{RegistryName, "10.200.0.1:5000"} {
		h := string(files[HostsDir+"/"+host+"/hosts.toml"].Content)
		if !strings.Contains(h, `server = "http://10.200.0.1:5000"`) || !strings.Contains(h, `[host."http://10.200.0.1:5000"]`) {
			t.Errorf("%s's hosts.toml:\n%s", host, h)
		}
	}
	if !strings.Contains(string(files[ContainerdConfig].Content), `config_path = "`+HostsDir+`"`) {
		t.Errorf("containerd's configuration does not read %s:\n%s", HostsDir, files[ContainerdConfig].Content)
	}
	for p := range Files(n, Credentials{Server: "https://10.200.0.1:6443"}) {
		if strings.HasPrefix(p, HostsDir) {
			t.Errorf("no registry, but %s", p)
		}
	}
}

// On a registered cluster kube-proxy authenticates with its ServiceAccount's token (no
// certificate of its own is written), and cluster DNS is the cluster's kube-dns address, or
// none; on hale's own control plane it is DNSServiceIP.
func TestRegisteredClusterFiles(t *testing.T) {
	n := Node{Name: "hyperpod-i-0123", IP: "10.200.0.10", ProviderID: "hale://i-0123"}
	files := Files(n, Credentials{Server: "https://10.200.0.1:6443", ProxyToken: "tok", ClusterDNS: "10.96.0.10"})
	if kc := string(files[ProxyKubeconf].Content); !strings.Contains(kc, `user: {token: "tok"}`) || strings.Contains(kc, "client-certificate") {
		t.Errorf("kube-proxy's kubeconfig:\n%s", kc)
	}
	if _, ok := files[PKIDir+"/kube-proxy.key"]; ok {
		t.Error("a kube-proxy key was written beside its token")
	}
	for dns, want := range map[string]string{"10.96.0.10": "clusterDNS: [10.96.0.10]", "-": "clusterDNS: []", "": "clusterDNS: [" + DNSServiceIP + "]"} {
		files := Files(n, Credentials{ClusterDNS: dns})
		if c := string(files[KubeletConfig].Content); !strings.Contains(c, want+"\n") {
			t.Errorf("ClusterDNS %q: the kubelet's configuration lacks %q:\n%s", dns, want, c)
		}
	}
}
