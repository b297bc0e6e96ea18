// Package provider turns nodes into machines. A Provider launches, terminates, reboots and
// describes instances; the reconcilers (internal/controller) decide when. Implementations:
// local/ (each instance a set of Linux namespaces on this machine) and static/ (machines of
// one's own, reached over SSH). A cloud provider fits behind the same interface: what the rest
// of hale needs to know of a provider is its Capabilities and the optional interfaces below
// (Quarantiner, PodRoutes, ...), never its Name.
package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ErrNotFound: the provider has no instance with that id.
var ErrNotFound = errors.New("provider: instance not found")

// State is what a provider knows of an instance.
type State string

// Instance states.
const (
	// Running: the machine exists and its agent process is alive.
	Running State = "running"
	// Stopped: the machine exists but nothing runs on it (its agent died, or a reboot is under way).
	Stopped State = "stopped"
)

// Instance is a machine the provider runs for a node.
type Instance struct {
	ID           string // "i-" + 17 hex digits
	ClusterID    string
	GroupName    string
	LogicalID    string
	InstanceType string
	IP           string // the node's customer address
	Hostname     string // ip-a-b-c-d, from IP
	State        State
	LaunchTime   time.Time
	// NetworkNodes is the instance's place in the network, top layer first, as EC2
	// DescribeInstanceTopology reports it (empty for types without topology); CapacityBlockID
	// names its UltraServer (NVLink domain), if any.
	NetworkNodes    []string
	CapacityBlockID string
}

// Mount is storage a node gets: a directory shared by every node of the cluster (FSx Lustre or
// OpenZFS stand-in) or one of its own (a secondary EBS volume), at Path inside the node.
type Mount struct {
	Shared bool   // shared by the cluster's nodes; else the node's own
	Name   string // names a shared directory (e.g. the file system's DNS name)
	Path   string // mount point inside the node, e.g. /fsx
}

// LaunchSpec is what Launch needs. InstanceID is chosen (and recorded) by the caller first, so
// that Launch is idempotent: launching an id that already runs returns that instance.
type LaunchSpec struct {
	InstanceID   string
	ClusterID    string
	ClusterName  string
	GroupName    string
	LogicalID    string
	InstanceType string
	// IP is the address to give the instance; empty asks the provider to pick a free one.
	// A replacement passes the old instance's address, so the node keeps its hostname.
	IP     string
	Mounts []Mount
	// AgentToken is the one-time bootstrap token the instance's agent enrolls with.
	AgentToken string
	// AgentServer is the host:port the instance's agent connects to (hale agent --server): the
	// server's --agent-listen address; empty leaves it to the provider (the local provider: its
	// bridge address and agent port).
	AgentServer string
	// AgentCA is the server's agent CA certificate (PEM): the agent verifies the server against
	// it and nothing else (hale agent --ca-file). Every provider puts it on the node beside the
	// token. It is public: no secret is in it.
	AgentCA []byte
	// DNSDomain makes the node's full name <hostname>.<DNSDomain> (us-west-2.compute.internal,
	// as EC2 names private hosts); it resolves on the cluster's nodes.
	DNSDomain string
	// ImageID is the node image the instance boots from (its group's ImageId: "ami-…", or
	// "default" / ""), and ImageRoot that image's root file system on this machine
	// (DATA_DIR/images/<id>/rootfs; the default image's, /var/lib/hale/images/default/rootfs;
	// "" for the provider's own root). The local provider makes ImageRoot the lower layer of
	// the node's root (docs/images.md); a provider that cannot boot images ignores both.
	ImageID   string
	ImageRoot string
	// Containers readies the instance for a container runtime and a kubelet (an Eks node whose
	// kubelet is real): on the local provider, cgroups and a cgroup namespace of its own, the
	// node stack's binaries and the kernel settings the kubelet reads (local/containers.go).
	Containers bool
}

// PodRoutes is a provider that routes the pod networks of a cluster's nodes between them (the
// local provider, whose nodes share its bridge: a real network has a CNI or the cloud's routes
// for it). hale's machine needs none: pods reach it with their node's address.
type PodRoutes interface {
	// RoutePods makes the pod routes of the cluster's instances routes: each instance reaches
	// every other's CIDR through that instance's address. Routes of the cluster not in routes
	// are removed.
	RoutePods(ctx context.Context, clusterID string, routes []PodRoute) error
}

// PodRoute is one node's pod network: CIDR, reached through Via (the node's address).
type PodRoute struct {
	InstanceID string
	CIDR       string
	Via        string
}

// Kind is a provider's name, as hale server --provider spells it ("local", "static"). It names
// the provider in logs and messages; nothing outside a provider's own package decides by it.
type Kind string

// Capabilities is what a provider can do, declared so that the API, the controller and the
// server ask for a capability instead of naming a provider.
type Capabilities struct {
	// Images: instances boot from node images (LaunchSpec.ImageRoot). Without it every
	// instance runs the machine's own operating system and only the image "default" can be
	// named (the static provider borrows hosts it cannot re-image).
	Images bool
	// SharedClock: instances read the server machine's own clock (namespaces on it), so their
	// clocks cannot drift from the server's and are never resynced.
	SharedClock bool
	// Reboot: Reboot restarts the instance on its own root, keeping its disks (both providers;
	// a provider without it has Reboot fail, and the controller replaces instead).
	Reboot bool
	// ReplaceKeepsAddress: a replacement gets the address of the instance it replaces (the
	// local provider, as HyperPod does); without it the new instance is another machine with
	// its own address and the node's name follows it (the static provider's spares).
	ReplaceKeepsAddress bool
	// SparePool: instances are drawn from a pool of machines that outlive them; a machine that
	// failed is quarantined instead of going back (the provider implements Quarantiner).
	SparePool bool
	// RealKubelets: an Eks node can run the node stack (containerd, a kubelet and kube-proxy of
	// its own: LaunchSpec.Containers).
	RealKubelets bool
	// SimulatedKubelets: an Eks node's kubelet may be simulated by kwok on the server's machine
	// instead (a test and benchmark setting; only instances on the server's own machine, whose
	// capacity is that machine's anyway, take it).
	SimulatedKubelets bool
}

// Provider launches and manages instances.
type Provider interface {
	// Name is the provider's name (see Kind).
	Name() Kind
	// Capabilities says what the provider can do.
	Capabilities() Capabilities
	// AgentAddress is the address the server must listen on for agents so that the provider's
	// instances reach it (for the local provider, the bridge's address).
	AgentAddress() string
	// Launch creates the instance and starts its agent. Launching an id the provider runs
	// already (a launch a server restart interrupted, repeated with a new agent token) returns
	// that instance, set up again where needed, and never makes a second one.
	Launch(ctx context.Context, spec LaunchSpec) (*Instance, error)
	// Terminate ends the instance and every process on it; terminating an unknown id is not an error.
	Terminate(ctx context.Context, id string) error
	// Reboot ends every process of the instance and starts its agent again.
	Reboot(ctx context.Context, id string) error
	// Describe returns one instance, or ErrNotFound.
	Describe(ctx context.Context, id string) (*Instance, error)
	// AgentRunning says whether the provider sees the instance's agent process run (alive, not
	// stopped), by its own means (the local provider: the process; a static one: SSH).
	// Heartbeats that stop while it runs point at the network or the control plane, not at a
	// dead node: it is the second path that confirms a heartbeat loss before a replacement. It
	// is asked while a repair waits, so it must be cheap.
	AgentRunning(ctx context.Context, id string) (bool, error)
	// List returns every instance the provider runs.
	List(ctx context.Context) ([]*Instance, error)
	// ReleaseCluster removes what the provider keeps for a deleted cluster (shared directories).
	ReleaseCluster(ctx context.Context, clusterID string) error
}

// NewInstanceID returns "i-" and 17 random hex digits, the shape of an EC2 instance id.
func NewInstanceID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return "i-" + hex.EncodeToString(b)[:17]
}

// Hostname is the HyperPod hostname of an address: ip-10-1-2-3 for 10.1.2.3.
func Hostname(ip string) string {
	return "ip-" + strings.ReplaceAll(ip, ".", "-")
}

// ParseIP checks an IPv4 address.
func ParseIP(ip string) (netip.Addr, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("provider: %q is not an IPv4 address", ip)
	}
	return a, nil
}

// Quarantiner is a provider whose machines outlive their instances (the static provider's
// hosts): Quarantine marks an instance about to be terminated for a fault, so that its machine
// is kept out of service with the evidence instead of going back to the pool.
type Quarantiner interface {
	Quarantine(id, evidence string) error
}

// KernelLogInjector is a provider that can append lines to an instance's kernel log, for
// `hale debug inject-fault` through the server (the static provider appends to the host's
// /dev/kmsg over SSH). The local provider has none: hale debug writes its nodes' log files on
// the machine itself (local.InjectFault).
type KernelLogInjector interface {
	InjectKernelLog(ctx context.Context, id string, lines []string) error
}

// IdentityWatcher is a provider that can tell when an instance's host answers as another
// machine than the one it knows: an SSH host key unlike known_hosts' (a reinstall, or a
// machine in the middle). IdentityProblem says what is wrong, with both identities, "" when
// nothing is. The controller holds such a node for an operator instead of judging its boot:
// it is neither failed, replaced nor quarantined for it, and it is back as soon as the
// provider reaches it again (the operator accepted the new key).
type IdentityWatcher interface {
	IdentityProblem(instanceID string) string
}

// Console is what a provider may offer to show an instance's recent output (EC2's console
// output), for failure messages.
type Console interface {
	ConsoleOutput(id string, lines int) string
}
