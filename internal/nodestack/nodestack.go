// Package nodestack is what runs on an Eks node whose kubelet is real (issue 28; research
// real-kubelets.md): containerd with runc and the reference CNI plugins, and the kubelet,
// configured for one node from the control plane's credentials. The binaries come from
// scripts/k8s-tools.sh (bin/k8s), bound into the node at BinDir by the provider; this package
// renders the files the node gets and the daemons its agent supervises.
//
// The settings are those a machine without systemd and on cgroup v1 needs (the local provider's
// nodes): the cgroupfs driver, failCgroupV1 off (Kubernetes 1.37 still runs on v1 when told),
// cgroupRoot "/" (the node's own cgroup namespace), no swap check, eviction thresholds at 0 %
// and image garbage collection at 100 % (the node's disk is the machine's, shared: as kind sets
// them), and containerd's restrict_oom_score_adj (a process may not lower its OOM score below
// containerd's own where the machine withholds CAP_SYS_RESOURCE, as this sandbox does).
package nodestack

import (
	"fmt"
	"strings"

	"github.com/haleproject/hale/internal/agentproto"
)

// BinDir is where the node stack's binaries are inside a node: kubelet, kube-proxy, containerd,
// containerd-shim-runc-v2, ctr, runc, pause, and the CNI plugins in cni/.
const BinDir = "/opt/hale/k8s"

// Paths of the node's files.
const (
	ContainerdConfig = "/etc/containerd/config.toml"
	CNITemplate      = "/etc/containerd/hale-cni.tmpl"
	ContainerdSocket = "/run/containerd/containerd.sock"
	KubeletConfig    = "/etc/kubernetes/kubelet/config.yaml"
	KubeletKubeconf  = "/etc/kubernetes/kubelet.conf"
	ProxyConfig      = "/etc/kubernetes/kube-proxy/config.yaml"
	ProxyKubeconf    = "/etc/kubernetes/kube-proxy.conf"
	PKIDir           = "/etc/kubernetes/pki"
	ResolvConf       = "/etc/kubernetes/resolv.conf"
	// PodEgress is the node's nftables table for pods' traffic leaving the pod network
	// (podEgress); PodEgressCommand loads it.
	PodEgress = "/etc/kubernetes/hale-pod-egress.nft"
	// ImagesDir is where, inside a node, the images every node imports are (the provider binds
	// them in: a 70 MB CoreDNS is no message for the agent's channel); PauseArchivePath and
	// CoreDNSArchivePath are their archives there.
	ImagesDir        = "/opt/hale/images"
	PauseArchivePath = ImagesDir + "/pause.tar"
	// PauseImage is the sandbox image: containerd 2.3's default, and kubeadm 1.37's.
	PauseImage = "registry.k8s.io/pause:3.10.2"
	// CoreDNSImage is cluster DNS's (kubeadm 1.37's CoreDNS version), CoreDNSArchivePath where
	// the node gets it.
	CoreDNSImage       = "registry.k8s.io/coredns/coredns:v1.14.6"
	CoreDNSArchivePath = ImagesDir + "/coredns.tar"
	// HostsDir is containerd's registry configuration (one hosts.toml per registry host).
	HostsDir = "/etc/containerd/certs.d"
	// RegistryName is the name pods' images give hale's registry (kubeplane runs it), whatever
	// its address: containerd maps it to Credentials.Registry over plain HTTP, so a manifest
	// that names registry.hale.internal/<repository>:<tag> runs on any hale cluster. ".internal"
	// is the top-level domain ICANN reserved for private use: no public name can be meant.
	RegistryName = "registry.hale.internal"
)

// Node is the node its files are for.
type Node struct {
	Name       string // the Node's name (hyperpod-i-…), the kubelet's --hostname-override
	IP         string // its InternalIP
	ProviderID string // hale://i-…
}

// Credentials are what the node's kubelet and kube-proxy need from the control plane
// (kubeplane.ControlPlane.NodeCredentials issues them): the API server's URL, the CA, the
// kubelet's client and serving certificates and keys, kube-proxy's, all PEM, and the pods'
// network (ClusterCIDR).
type Credentials struct {
	Server                  string
	CA                      []byte
	ClientCert, ClientKey   []byte
	ServingCert, ServingKey []byte
	ProxyCert, ProxyKey     []byte
	// ProxyToken, when set, is kube-proxy's bearer token (a ServiceAccount's, on a registered
	// cluster whose CA hale does not hold) instead of ProxyCert and ProxyKey.
	ProxyToken  string
	ClusterCIDR string
	// ClusterDNS is cluster DNS's Service address, pods' nameserver: DNSServiceIP when empty
	// (the control plane hale runs); none when "-" (a registered cluster without kube-dns).
	ClusterDNS string
	// Registry is hale's OCI registry (host:port, plain HTTP on hale's bridge), which the
	// node's containerd pulls RegistryName's images from; empty when none runs.
	Registry string
}

// registryHosts is containerd's hosts.toml that sends pulls of a registry's images to hale's
// registry at addr over plain HTTP.
func registryHosts(addr string) string {
	return fmt.Sprintf("server = %q\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+addr, "http://"+addr)
}

// File is one file of the node: its content and mode.
type File struct {
	Content []byte
	Mode    uint32
}

// Files returns the node's files by path: containerd's configuration, CNI template and
// registry hosts (RegistryName and c.Registry, when set), the kubelet's configuration and
// kubeconfig, the certificates, and an empty resolv.conf for pods (the node's own names its
// host's resolver, which pods cannot reach; cluster DNS is the kubelet's clusterDNS).
func Files(n Node, c Credentials) map[string]File {
	files := map[string]File{
		ContainerdConfig:               {[]byte(containerdConfig), 0o644},
		CNITemplate:                    {[]byte(cniTemplate), 0o644},
		KubeletConfig:                  {[]byte(kubeletConfig(c.ClusterDNS)), 0o644},
		KubeletKubeconf:                {[]byte(kubeconfig(c.Server, "system:node:"+n.Name, "kubelet-client")), 0o600},
		ProxyConfig:                    {[]byte(proxyConfig(n.Name, c.ClusterCIDR)), 0o644},
		PKIDir + "/ca.crt":             {c.CA, 0o644},
		PKIDir + "/kubelet-client.crt": {c.ClientCert, 0o644},
		PKIDir + "/kubelet-client.key": {c.ClientKey, 0o600},
		PKIDir + "/kubelet.crt":        {c.ServingCert, 0o644},
		PKIDir + "/kubelet.key":        {c.ServingKey, 0o600},
		ResolvConf:                     {nil, 0o644},
		PodEgress:                      {[]byte(podEgress(c.ClusterCIDR)), 0o644},
	}
	if c.ProxyToken != "" {
		files[ProxyKubeconf] = File{[]byte(tokenKubeconfig(c.Server, "system:kube-proxy", c.ProxyToken)), 0o600}
	} else {
		files[ProxyKubeconf] = File{[]byte(kubeconfig(c.Server, "system:kube-proxy", "kube-proxy")), 0o600}
		files[PKIDir+"/kube-proxy.crt"] = File{c.ProxyCert, 0o644}
		files[PKIDir+"/kube-proxy.key"] = File{c.ProxyKey, 0o600}
	}
	if c.Registry != "" {
		// By its name, and by its address (what a user pushed to from the host).
		for _, host := range []string{RegistryName, c.Registry} {
			files[HostsDir+"/"+host+"/hosts.toml"] = File{[]byte(registryHosts(c.Registry)), 0o644}
		}
	}
	return files
}

// nodePath is the daemons' PATH: the node stack first (containerd finds its runc shim there).
var nodePath = map[string]string{"PATH": BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// Containerd is the container runtime; its PATH finds the runc shim and the CNI plugins' runc.
func Containerd() *agentproto.Daemon {
	return &agentproto.Daemon{Name: "containerd", Argv: []string{BinDir + "/containerd", "--config", ContainerdConfig},
		Env: nodePath, LogPath: "/var/log/containerd.log"}
}

// Kubelet is the node's kubelet, registering Node n.
func Kubelet(n Node) *agentproto.Daemon {
	return &agentproto.Daemon{Name: "kubelet", Argv: []string{BinDir + "/kubelet", "--config", KubeletConfig, "--kubeconfig", KubeletKubeconf,
		"--hostname-override", n.Name, "--node-ip", n.IP, "--provider-id", n.ProviderID, "--v", "1"},
		Env: nodePath, LogPath: "/var/log/kubelet.log"}
}

// podEgress is the node's nftables table that gives pods' packets to anything outside the pod
// network (clusterCIDR) the node's address, as kindnet's and the VPC CNI's SNAT for traffic
// leaving the cluster do; pod-to-pod traffic keeps its addresses (Kubernetes' network model).
// The control plane and hale's services then answer the node, and the machine they run on needs
// no route to any pod: such routes were shared by every hale on a machine, whose clusters all
// give pods 10.244.0.0/16, so one hale's routes replaced or removed another's, and that
// cluster's CoreDNS, cut from its API server, stopped answering (TestEksRealKubelets
// "another hale's routes"). Loading it replaces the table: a restart finds it as written.
func podEgress(clusterCIDR string) string {
	return fmt.Sprintf(`table ip hale-pod-egress
delete table ip hale-pod-egress
table ip hale-pod-egress {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %s ip daddr != %s masquerade
	}
}
`, clusterCIDR, clusterCIDR)
}

// PodEgressCommand is the command that loads the node's PodEgress table (nft: the node's image
// has nftables, as kube-proxy's mode needs).
func PodEgressCommand() []string { return []string{"nft", "-f", PodEgress} }

// Import is the command that puts the image archive at path, pinned (kept from image garbage
// collection), into containerd's Kubernetes namespace.
func Import(path string) []string {
	return []string{BinDir + "/ctr", "--address", ContainerdSocket, "--namespace", "k8s.io", "images", "import",
		"--label", "io.cri-containerd.pinned=pinned", path}
}

// containerdConfig is containerd 2.x's configuration (version 3).
var containerdConfig = strings.TrimLeft(fmt.Sprintf(`
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = %q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = "/etc/cni/net.d"
    conf_template = %q
`, ContainerdSocket, PauseImage, HostsDir, BinDir+"/runc", BinDir+"/cni", CNITemplate), "\n")

// cniTemplate is the pod network of one node, which containerd renders with the node's pod CIDR
// once the kubelet has it from its Node: a bridge (cni0) whose address is the pods' gateway, and
// addresses from the CIDR.
const cniTemplate = `{
  "cniVersion": "1.0.0",
  "name": "hale",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{.PodCIDR}}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
`

// kubeletConfig is the kubelet's configuration with cluster DNS at dns (Credentials.ClusterDNS):
// see the package's comment for why each setting.
func kubeletConfig(dns string) string {
	switch dns {
	case "":
		dns = DNSServiceIP
	case "-":
		dns = ""
	}
	return strings.TrimLeft(fmt.Sprintf(`
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
failSwapOn: false
containerRuntimeEndpoint: unix://%s
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
staticPodPath: /etc/kubernetes/manifests
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: %s/kubelet.crt
tlsPrivateKeyFile: %s/kubelet.key
readOnlyPort: 0
serializeImagePulls: false
`, ContainerdSocket, dns, ResolvConf, PKIDir, PKIDir, PKIDir), "\n")
}

// DNSServiceIP is cluster DNS's Service address (kubeplane runs CoreDNS behind it), pods'
// nameserver.
const DNSServiceIP = "10.0.0.10"

// kubeconfig is a kubeconfig for user, whose client certificate is PKIDir/<cert>.crt.
func kubeconfig(server, user, cert string) string {
	return kubeconfigAs(server, user, fmt.Sprintf("client-certificate: %s/%s.crt, client-key: %s/%s.key", PKIDir, cert, PKIDir, cert))
}

// tokenKubeconfig is a kubeconfig for user, who authenticates with a bearer token.
func tokenKubeconfig(server, user, token string) string {
	return kubeconfigAs(server, user, fmt.Sprintf("token: %q", token))
}

// kubeconfigAs is a kubeconfig for user with credentials auth (the user's fields, YAML).
func kubeconfigAs(server, user, auth string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: hale
  cluster: {server: %q, certificate-authority: %s/ca.crt}
users:
- name: %q
  user: {%s}
contexts:
- name: hale
  context: {cluster: hale, user: %q}
current-context: hale
`, server, PKIDir, user, auth, user)
}

// proxyConfig is kube-proxy's configuration: nftables (over netlink: no nft program needed;
// IPVS is not in this kernel), each node's own rules in its network namespace, and no
// conntrack table size set (nf_conntrack_max is the whole machine's).
func proxyConfig(name, clusterCIDR string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: %s
hostnameOverride: %s
clientConnection: {kubeconfig: %s}
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
`, clusterCIDR, name, ProxyKubeconf)
}

// KubeProxy is the node's Service proxy.
func KubeProxy() *agentproto.Daemon {
	return &agentproto.Daemon{Name: "kube-proxy", Argv: []string{BinDir + "/kube-proxy", "--config", ProxyConfig, "--v", "1"},
		Env: nodePath, LogPath: "/var/log/kube-proxy.log"}
}
