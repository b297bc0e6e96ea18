// Package local is hale's embedded provider: every instance is a set of Linux namespaces on
// this machine.
//
//   - A network namespace "hale-<instance-id>" with one veth whose host end is on hale's bridge;
//     its address comes from one private subnet that only hale uses, and there is no default
//     route, so nothing a node sends leaves the machine.
//   - A UTS namespace with the hostname ip-a-b-c-d of its address.
//   - A mount namespace in which the node's own directories are bound over /opt/ml, /var/log,
//     /var/spool/slurmd, /var/spool/slurmctld, /var/lib/hale-agent and Slurm's and munge's
//     directories, a secondary EBS volume over /opt/sagemaker, and the cluster's shared
//     directories (the FSx stand-ins) over their mount paths; NodeDisk is a small tmpfs of its own.
//     A node whose group names a built image has an overlay of that image as its root instead of
//     the host's (imageroot.go), with the same directories bound in.
//
// The agent is started through nsenter and unshare (never `ip netns exec`, which remounts /sys
// and hides the cgroup file systems Slurm needs; research slurm-local-cluster.md §4), so the
// started process is the agent itself. Everything the provider knows about an instance is in
// ROOT/instances/<id>/instance.json, so a restarted server adopts what a crashed one left.
// Root is required.
package local

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/provider"
)

// Defaults for Config.
const (
	DefaultBridge = "hale0"
	// DefaultSubnet is the private /16 hale's nodes live in; the bridge takes its first address.
	DefaultSubnet = "10.222.0.0/16"
)

// Config configures the local provider.
type Config struct {
	// Root holds the instances' records and directories, e.g. DATA_DIR/local.
	Root string
	// Shared: several servers on one store open the same Root, and only the one that leads
	// acts on it (its store lease orders them); the root's lock is taken shared, which still
	// keeps out a server that did not say so.
	Shared bool
	// Bridge is the host bridge the nodes' veths join; Subnet its network.
	Bridge string
	Subnet string
	// AgentBinary is the hale executable the nodes run as `hale agent`.
	AgentBinary string
	// AgentPort is the port the server listens on for agents, at the bridge's address.
	AgentPort int
	// AgentArgs are extra arguments for every agent (e.g. heartbeat settings).
	AgentArgs []string
	// NodeStack is the directory of the node stack's binaries (bin/k8s: kubelet, containerd,
	// runc, ...), bound into nodes launched with Containers; "" when none is built. NodeImages,
	// the image archives those nodes import (pause, CoreDNS), bound beside it.
	NodeStack  string
	NodeImages string
	Logger     *slog.Logger
}

// Provider is the local provider.
type Provider struct {
	cfg     Config
	subnet  netip.Prefix
	gateway netip.Addr
	log     *slog.Logger
	mu      sync.Mutex // serializes launches (address choice) and terminations
	lock    *os.File   // ROOT/provider.lock, held while the provider lives
}

var _ provider.Provider = (*Provider)(nil)

// ErrNotRoot is returned by New when the process is not root.
var ErrNotRoot = errors.New("the local provider needs root (it creates network namespaces, veths and bind mounts); run hale as root")

// New checks the machine, creates the bridge if needed and returns the provider.
func New(cfg Config) (*Provider, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.Bridge == "" {
		cfg.Bridge = DefaultBridge
	}
	if cfg.Subnet == "" {
		cfg.Subnet = DefaultSubnet
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AgentBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.AgentBinary = exe
	}
	prefix, err := netip.ParsePrefix(cfg.Subnet)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24 {
		return nil, fmt.Errorf("local provider: subnet %q must be an IPv4 prefix of /24 or larger", cfg.Subnet)
	}
	for _, tool := range []string{"ip", "nsenter", "unshare"} {
		if _, err := lookPath(tool); err != nil {
			return nil, fmt.Errorf("local provider: %s not found (install iproute2 and util-linux)", tool)
		}
	}
	p := &Provider{cfg: cfg, subnet: prefix.Masked(), log: cfg.Logger}
	p.gateway = p.subnet.Addr().Next()
	if err := os.MkdirAll(filepath.Join(cfg.Root, "instances"), 0o700); err != nil {
		return nil, err
	}
	if p.lock, err = lockRoot(cfg.Root, cfg.Shared); err != nil {
		return nil, err
	}
	if err := p.ensureBridge(); err != nil {
		p.lock.Close()
		return nil, err
	}
	return p, nil
}

// Name returns "local".
func (p *Provider) Name() provider.Kind { return Kind }

// Kind is the local provider's name.
const Kind provider.Kind = "local"

// Capabilities is what the local provider can do: nodes are namespaces on the server's
// machine, booting node images, keeping their address through a replacement, with a kubelet of
// their own or kwok's.
var Capabilities = provider.Capabilities{Images: true, SharedClock: true, Reboot: true, ReplaceKeepsAddress: true,
	RealKubelets: true, SimulatedKubelets: true}

// Capabilities implements provider.Provider.
func (p *Provider) Capabilities() provider.Capabilities { return Capabilities }

// Gateway is the bridge's address in the node subnet, where nodes reach the server.
func (p *Provider) Gateway() string { return p.gateway.String() }

// AgentAddress is the bridge's address: the server listens there for agents.
func (p *Provider) AgentAddress() string { return p.gateway.String() }

// agentServer is where agents dial.
func (p *Provider) agentServer() string { return fmt.Sprintf("%s:%d", p.gateway, p.cfg.AgentPort) }

// Subnet is the node subnet.
func (p *Provider) Subnet() netip.Prefix { return p.subnet }

// record is instance.json: everything the provider knows about an instance.
type record struct {
	ID           string           `json:"InstanceId"`
	ClusterID    string           `json:"ClusterId"`
	ClusterName  string           `json:"ClusterName"`
	GroupName    string           `json:"InstanceGroupName"`
	LogicalID    string           `json:"NodeLogicalId"`
	InstanceType string           `json:"InstanceType"`
	IP           string           `json:"IpAddress"`
	Hostname     string           `json:"Hostname"`
	Netns        string           `json:"Netns"`
	HostVeth     string           `json:"HostVeth"`
	Mounts       []provider.Mount `json:"Mounts,omitempty"`
	LaunchTime   time.Time        `json:"LaunchTime"`
	AgentToken   string           `json:"AgentToken,omitempty"`
	// AgentServer is where the agent connects ("" for instances recorded before: the bridge).
	AgentServer string `json:"AgentServer,omitempty"`
	DNSDomain   string `json:"DnsDomain,omitempty"`
	// NetworkNodes and CapacityBlockID are the instance's place in the simulated fabric
	// (fabric.go), Leaf its leaf's index (-1: none).
	NetworkNodes    []string `json:"NetworkNodes,omitempty"`
	CapacityBlockID string   `json:"CapacityBlockId,omitempty"`
	Leaf            int      `json:"Leaf"`
	// ImageID is the node image the instance boots from, ImageRoot its root file system on
	// this machine ("" for both: the host's root, as before images).
	ImageID   string `json:"ImageId,omitempty"`
	ImageRoot string `json:"ImageRoot,omitempty"`
	// Containers: the node runs a container runtime and a kubelet (containers.go); Cgroups are
	// its cgroups as made at its last boot, removed when it stops.
	Containers bool     `json:"Containers,omitempty"`
	Cgroups    []Cgroup `json:"Cgroups,omitempty"`
}

func (p *Provider) dir(id string) string { return filepath.Join(p.cfg.Root, "instances", id) }

func (p *Provider) sharedDir(clusterID, name string) string {
	return filepath.Join(p.cfg.Root, "clusters", clusterID, "shared", safeName(name))
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

func (p *Provider) readRecord(id string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(p.dir(id), "instance.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, provider.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("local provider: %s/instance.json: %w", id, err)
	}
	return &r, nil
}

func (p *Provider) writeRecord(r *record) error {
	b, _ := json.MarshalIndent(r, "", "  ")
	path := filepath.Join(p.dir(r.ID), "instance.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (p *Provider) records() ([]*record, error) {
	entries, err := os.ReadDir(filepath.Join(p.cfg.Root, "instances"))
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range entries {
		r, err := p.readRecord(e.Name())
		if errors.Is(err, provider.ErrNotFound) {
			continue // a directory left half-made: Terminate cleans it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LaunchTime.Before(out[j].LaunchTime) })
	return out, nil
}

func (p *Provider) instance(r *record) *provider.Instance {
	st := provider.Stopped
	if pids := netnsPIDs(r.Netns); len(pids) > 0 {
		st = provider.Running
	}
	return &provider.Instance{ID: r.ID, ClusterID: r.ClusterID, GroupName: r.GroupName, LogicalID: r.LogicalID,
		InstanceType: r.InstanceType, IP: r.IP, Hostname: r.Hostname, State: st, LaunchTime: r.LaunchTime,
		NetworkNodes: r.NetworkNodes, CapacityBlockID: r.CapacityBlockID}
}

// AgentRunning reads the agent's process from /proc: no command runs.
func (p *Provider) AgentRunning(ctx context.Context, id string) (bool, error) {
	if _, err := p.readRecord(id); err != nil {
		return false, err
	}
	return agentRunning(p.dir(id)), nil
}

// agentRunning says whether the agent process of an instance directory runs: its pid (from
// agent.pid) is a hale agent that is neither stopped (SIGSTOP) nor a zombie.
func agentRunning(dir string) bool {
	pid, err := pidFile(filepath.Join(dir, "agent.pid"))
	if err != nil {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(append([]byte{0}, cmdline...), []byte("\x00agent\x00")) { // hale agent ...
		return false // gone, or the pid belongs to another process now
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the command name's closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'T', 't', 'Z', 'X':
		return false
	}
	return true
}

// Describe returns the instance with that id.
func (p *Provider) Describe(ctx context.Context, id string) (*provider.Instance, error) {
	r, err := p.readRecord(id)
	if err != nil {
		return nil, err
	}
	return p.instance(r), nil
}

// List returns every instance with a record.
func (p *Provider) List(ctx context.Context) ([]*provider.Instance, error) {
	rs, err := p.records()
	if err != nil {
		return nil, err
	}
	out := make([]*provider.Instance, len(rs))
	for i, r := range rs {
		p.healPIDFiles(r)
		out[i] = p.instance(r)
	}
	return out, nil
}

// Launch creates the instance's namespaces and directories and starts its agent. Launching an
// id that has a record finishes what a crashed launch left: the namespace is made if missing
// and the agent started if not running.
func (p *Provider) Launch(ctx context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	inst, wait, err := p.launch(spec)
	if err == nil && wait != nil {
		// Without p.mu: the nodes of a scale-up set up side by side. The instance launch saw
		// may have had no process in its namespace yet; once wait found the agent, it runs.
		if err = wait(); err == nil {
			inst.State = provider.Running
		}
	}
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// launch is Launch's part under p.mu: the instance's record, directories and namespace, and its
// agent started (wait, when not nil, waits until it runs).
func (p *Provider) launch(spec provider.LaunchSpec) (inst *provider.Instance, wait func() error, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.readRecord(spec.InstanceID)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		r, err = p.newRecord(spec)
	case err == nil && spec.AgentToken != "" && spec.AgentToken != r.AgentToken:
		// A launch repeated after a server restart comes with a new token; an agent that has
		// not registered yet reads it on its next attempt.
		r.AgentToken = spec.AgentToken
		r.AgentServer = cmp.Or(spec.AgentServer, r.AgentServer)
		err = p.writeRecord(r)
	}
	if err != nil {
		return nil, nil, err
	}
	if r.AgentToken != "" {
		if err := os.WriteFile(filepath.Join(p.dir(r.ID), "token"), []byte(r.AgentToken), 0o600); err != nil {
			return nil, nil, err
		}
	}
	if len(spec.AgentCA) > 0 {
		// Beside the token, read by the agent at its start (hale agent --ca-file): public.
		if err := os.WriteFile(filepath.Join(p.dir(r.ID), "ca.crt"), spec.AgentCA, 0o644); err != nil {
			return nil, nil, err
		}
	}
	if err := p.prepareDirs(r); err != nil {
		return nil, nil, err
	}
	if err := p.writeHosts(r.ClusterID); err != nil {
		return nil, nil, err
	}
	if err := p.ensureNetns(r); err != nil {
		return nil, nil, err
	}
	if len(netnsPIDs(r.Netns)) == 0 {
		if wait, err = p.startAgent(r); err != nil {
			return nil, nil, err
		}
	} else {
		p.healPIDFiles(r)
	}
	return p.instance(r), wait, nil
}

func (p *Provider) newRecord(spec provider.LaunchSpec) (*record, error) {
	ip := spec.IP
	if ip == "" {
		var err error
		if ip, err = p.freeAddress(); err != nil {
			return nil, err
		}
	} else {
		a, err := provider.ParseIP(ip)
		if err != nil {
			return nil, err
		}
		if !p.subnet.Contains(a) || a == p.gateway {
			return nil, fmt.Errorf("local provider: address %s is not a node address of %s", ip, p.subnet)
		}
		if owner := p.addressOwner(ip); owner != "" {
			return nil, fmt.Errorf("local provider: address %s is still used by %s", ip, owner)
		}
	}
	r := &record{ID: spec.InstanceID, ClusterID: spec.ClusterID, ClusterName: spec.ClusterName, GroupName: spec.GroupName,
		LogicalID: spec.LogicalID, InstanceType: spec.InstanceType, IP: ip, Hostname: provider.Hostname(ip),
		Netns: "hale-" + spec.InstanceID, HostVeth: vethName(ip), Mounts: spec.Mounts,
		LaunchTime: time.Now().UTC().Truncate(time.Millisecond), AgentToken: spec.AgentToken, AgentServer: spec.AgentServer,
		DNSDomain: spec.DNSDomain, Leaf: -1, ImageID: spec.ImageID, ImageRoot: spec.ImageRoot, Containers: spec.Containers}
	if r.Containers && r.ImageRoot == "" {
		return nil, errors.New("local provider: a node with a container runtime boots from an image (scripts/setup.sh builds the default one)")
	}
	if err := p.place(r); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.dir(r.ID), 0o700); err != nil {
		return nil, err
	}
	return r, p.writeRecord(r)
}

// freeAddress picks the lowest address of the subnet, after the gateway and a few reserved
// ones, that no instance has.
func (p *Provider) freeAddress() (string, error) {
	used := map[string]bool{}
	rs, err := p.records()
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		used[r.IP] = true
	}
	a := p.gateway
	for i := 0; i < 9; i++ { // .2-.9 stay free for the operator
		a = a.Next()
	}
	for ; p.subnet.Contains(a); a = a.Next() {
		if b := a.As4(); b[3] == 0 || b[3] == 255 {
			continue
		}
		if !used[a.String()] {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("local provider: no free address left in %s", p.subnet)
}

func (p *Provider) addressOwner(ip string) string {
	rs, _ := p.records()
	for _, r := range rs {
		if r.IP == ip {
			return r.ID
		}
	}
	return ""
}

// vethName is the host end's name: interface names have at most 15 characters, so it is made
// from the address, which is unique among live instances.
func vethName(ip string) string {
	a, _ := netip.ParseAddr(ip)
	b := a.As4()
	return fmt.Sprintf("hv%02x%02x%02x", b[1], b[2], b[3])
}

// Terminate ends every process of the instance, deletes its namespace and its directories.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.readRecord(id)
	if errors.Is(err, provider.ErrNotFound) {
		return os.RemoveAll(p.dir(id))
	}
	if err != nil {
		return err
	}
	if err := killNetns(ctx, r.Netns); err != nil {
		return err
	}
	if err := removeCgroups(r.Cgroups); err != nil {
		p.log.Warn("a terminated node's cgroups", "instance_id", r.ID, "error", err)
	}
	if err := deleteNetns(r.Netns, r.HostVeth); err != nil {
		return err
	}
	if err := os.RemoveAll(p.dir(id)); err != nil {
		return err
	}
	return p.writeHosts(r.ClusterID)
}

// hostsFile is the cluster's /etc/hosts, bound into every node: the name resolution a VPC's
// DNS gives HyperPod nodes (each node resolves its own and the others' ip-a-b-c-d names).
func (p *Provider) hostsFile(clusterID string) string {
	return filepath.Join(p.cfg.Root, "clusters", clusterID, "hosts")
}

// writeHosts rewrites the cluster's hosts file from the instance records. It writes in place:
// the nodes' bind mounts pin the file's inode, so a rename would go unseen.
func (p *Provider) writeHosts(clusterID string) error {
	rs, err := p.records()
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, r := range rs {
		if r.ClusterID != clusterID {
			continue
		}
		if r.DNSDomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s %s\n", r.IP, r.Hostname, r.DNSDomain, r.Hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", r.IP, r.Hostname)
		}
	}
	path := p.hostsFile(clusterID)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Reboot ends every process of the instance and starts its agent again; the namespace, the
// address and the node's directories stay, as a machine's disks survive a reboot. A whole
// number of seconds in the instance directory's PostSecondsFile is a real server's firmware
// POST: the node stays down that long before it starts again (the robustness suite's slow
// reboots; the static test bed has /etc/hale-testhost-post-seconds for its hosts).
func (p *Provider) Reboot(ctx context.Context, id string) error {
	if err := p.halt(ctx, id); err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(p.dir(id), PostSecondsFile)); err == nil {
		if secs, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && secs > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(secs) * time.Second):
			}
		}
	}
	wait, err := p.boot(id)
	if err != nil {
		return err
	}
	return wait() // without p.mu, as Launch
}

// PostSecondsFile names the file in an instance's directory that makes its reboots slow.
const PostSecondsFile = "post-seconds"

// halt ends every process of the instance.
func (p *Provider) halt(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.readRecord(id)
	if err != nil {
		return err
	}
	if err := killNetns(ctx, r.Netns); err != nil {
		return err
	}
	if err := removeCgroups(r.Cgroups); err != nil {
		p.log.Warn("a halted node's cgroups", "instance_id", r.ID, "error", err)
	}
	return nil
}

// boot starts a halted instance again; an instance terminated meanwhile is not.
func (p *Provider) boot(id string) (wait func() error, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.readRecord(id)
	if err != nil {
		return nil, err
	}
	if err := p.ensureNetns(r); err != nil {
		return nil, err
	}
	return p.startAgent(r)
}

// ConsoleOutput returns the last lines the instance's agent wrote, like EC2's console output.
func (p *Provider) ConsoleOutput(id string, lines int) string {
	b, err := os.ReadFile(filepath.Join(p.dir(id), "agent.log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// ReleaseCluster removes the cluster's shared directories.
func (p *Provider) ReleaseCluster(ctx context.Context, clusterID string) error {
	return os.RemoveAll(filepath.Join(p.cfg.Root, "clusters", clusterID))
}

// Close removes the bridge when no instance is left on it, so a provider that is done leaves
// nothing behind on the machine, and releases the root's lock.
func (p *Provider) Close() error {
	rs, err := p.records()
	if err != nil || len(rs) > 0 {
		unlockRoot(p.lock)
		return err
	}
	if p.cfg.Shared {
		// Other servers of the store may still serve their agents on the bridge: only the last
		// one out (it gets the root's lock whole) removes it.
		unlockRoot(p.lock)
		last, err := lockRoot(p.cfg.Root, false)
		if err != nil {
			return nil
		}
		defer unlockRoot(last)
		return deleteLink(p.cfg.Bridge)
	}
	defer unlockRoot(p.lock)
	return deleteLink(p.cfg.Bridge)
}
