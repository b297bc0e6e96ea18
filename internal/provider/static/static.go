package static

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/provider"
)

// Where hale puts its files on a host; Terminate removes them all.
const (
	BinDir     = "/opt/hale/bin"       // the hale binary and the agent's start scripts
	ConfDir    = "/etc/hale"           // the bootstrap token and the agent CA certificate
	StateDir   = "/var/lib/hale-agent" // the agent's state (its key and certificate, node secret)
	AgentLog   = "/var/log/hale-agent.log"
	UnitFile   = "/etc/systemd/system/hale-agent.service"
	pidFile    = "/run/hale-agent.pid" // the supervising loop's pid, which is its session id
	bootIDFile = "/proc/sys/kernel/random/boot_id"
	systemdDir = "/run/systemd/system" // there when systemd runs the host
)

// layout is where the provider's scripts find hale's files and the host's on a host: the paths
// above, under root. The zero value is the real paths (root ""), as every host has them; the
// package's tests give each of their hosts (SSH servers that run the scripts as an unprivileged
// user) a directory of its own as root (Config.layout).
type layout struct {
	root string
}

// layout is host h's layout: the real paths unless a test says otherwise.
func (p *Provider) layout(h *Host) layout {
	if p.cfg.layout == nil {
		return layout{}
	}
	return p.cfg.layout(h)
}

// path is the absolute path p on the host.
func (l layout) path(p string) string { return l.root + p }

// agentMatch is the pgrep -f pattern of the agent's command line.
func (l layout) agentMatch() string { return "^" + l.path(BinDir) + "/hale agent" }

// DefaultRebootTimeout is how long a rebooting host has to answer SSH again with a new boot id
// before the provider calls it Unreachable. The controller's reboot budget decides when the
// node is replaced (20 minutes for GPU types, more for a host whose last reboot was slow:
// internal/controller/bootbudget.go); the provider keeps waiting longer than that, so a host
// that comes back within its budget gets its agent started again, and stops once the node's
// instance is terminated.
const DefaultRebootTimeout = time.Hour

// Config configures the static provider.
type Config struct {
	// Root holds the pool's state (pool.json), e.g. DATA_DIR/static.
	Root string
	// Inventory is the hosts file, loaded and checked (Load).
	Inventory *Inventory
	// KnownHosts is the known_hosts file host keys are checked against; AcceptNewHostKeys adds
	// the key of a host it does not name (never one that differs from a known key).
	KnownHosts        string
	AcceptNewHostKeys bool
	// AgentServer is host:port where the hosts' agents reach the server (hale server
	// --agent-listen).
	AgentServer string
	// AgentBinary is the hale executable copied to each host (default: this one).
	AgentBinary string
	// AgentArgs are extra arguments for every agent.
	AgentArgs []string
	// NodeStack and NodeImages are the node stack's programs (bin/k8s) and the image archives
	// every Eks node imports, copied to a host that runs an Eks node (nodestack.go); "" when
	// the server runs no real kubelets, and Eks nodes are refused.
	NodeStack, NodeImages string
	RebootTimeout         time.Duration
	Logger                *slog.Logger
	// layout, set only by the package's tests, says where a host's files are (nil: the real
	// paths).
	layout func(h *Host) layout
}

// Provider is the static provider: each instance is a host of the pool.
type Provider struct {
	cfg  Config
	log  *slog.Logger
	ssh  *dialer
	hash string // sha256 of AgentBinary

	mu    sync.Mutex
	st    poolState
	short map[string]map[string]bool // cluster/group → instance ids the pool could not serve
	// identity: instances whose host answered a reboot's wait with another host key, and the
	// error naming both (provider.IdentityWatcher).
	identity map[string]string
}

var (
	_ provider.Provider        = (*Provider)(nil)
	_ provider.Quarantiner     = (*Provider)(nil)
	_ provider.IdentityWatcher = (*Provider)(nil)
)

// IdentityProblem implements provider.IdentityWatcher: the host key error a rebooting
// instance's host answers with, "" when none.
func (p *Provider) IdentityProblem(instanceID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.identity[instanceID]
}

// setIdentity records (why non-empty) or clears an instance's identity problem.
func (p *Provider) setIdentity(instanceID, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why == "" {
		delete(p.identity, instanceID)
		return
	}
	if p.identity == nil {
		p.identity = map[string]string{}
	}
	p.identity[instanceID] = why
}

// New loads the pool's state and returns the provider. It does not contact the hosts.
func New(cfg Config) (*Provider, error) {
	if cfg.Inventory == nil || len(cfg.Inventory.Hosts) == 0 {
		return nil, errors.New("static provider: no hosts (--hosts FILE)")
	}
	if cfg.AgentServer == "" {
		return nil, errors.New("static provider: the agents need an address to reach the server: give hale server --agent-listen HOST:PORT (an address the hosts can reach)")
	}
	if host, _, err := net.SplitHostPort(cfg.AgentServer); err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
		return nil, fmt.Errorf("static provider: --agent-listen %q must be HOST:PORT with an address the hosts can reach", cfg.AgentServer)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RebootTimeout <= 0 {
		cfg.RebootTimeout = DefaultRebootTimeout
	}
	if cfg.AgentBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.AgentBinary = exe
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, err
	}
	if cfg.KnownHosts == "" {
		home, _ := os.UserHomeDir()
		cfg.KnownHosts = home + "/.ssh/known_hosts"
	}
	d, err := newDialer(cfg.KnownHosts, cfg.AcceptNewHostKeys)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(cfg.AgentBinary)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	_, err = io.Copy(sum, f)
	f.Close()
	if err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, log: cfg.Logger, ssh: d, hash: hex.EncodeToString(sum.Sum(nil)), short: map[string]map[string]bool{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Close closes the SSH connections.
func (p *Provider) Close() error { p.ssh.close(); return nil }

// Name returns "static".
func (p *Provider) Name() provider.Kind { return Kind }

// Kind is the static provider's name.
const Kind provider.Kind = "static"

// Capabilities is what the static provider can do: hosts run their own operating system and
// clock, reboot in place, and are drawn from the inventory's pool (a replacement is a spare with
// its own address; a failed host is quarantined); they can run the Eks node stack.
var Capabilities = provider.Capabilities{Reboot: true, SparePool: true, RealKubelets: true}

// Capabilities implements provider.Provider.
func (p *Provider) Capabilities() provider.Capabilities { return Capabilities }

// AgentAddress is the host part of --agent-listen.
func (p *Provider) AgentAddress() string {
	host, _, _ := net.SplitHostPort(p.cfg.AgentServer)
	return host
}

func (p *Provider) host(address string) *Host {
	for i := range p.cfg.Inventory.Hosts {
		if p.cfg.Inventory.Hosts[i].Address == address {
			return &p.cfg.Inventory.Hosts[i]
		}
	}
	return nil
}

// ShortfallError is a launch the pool cannot serve: the group needs Missing more hosts of
// InstanceType than are Available.
type ShortfallError struct {
	Group, InstanceType    string
	Missing                int
	Total, InUse, Excluded int
}

func (e *ShortfallError) Error() string {
	return fmt.Sprintf("the host pool is short of %d host(s) of type %s for instance group %s (the hosts file has %d of that type: %d in use, %d quarantined or unreachable, none available); add hosts to the hosts file or return repaired ones with hale hosts return",
		e.Missing, e.InstanceType, e.Group, e.Total, e.InUse, e.Excluded)
}

// Launch takes an Available host of the instance type from the pool, installs hale's agent on
// it over SSH and starts it. A host that cannot be reached goes to Unreachable and the next one
// is tried; a pool with none left returns a *ShortfallError. Launching an instance the provider
// runs already sets its host up again (relaunch).
func (p *Provider) Launch(ctx context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	p.mu.Lock()
	var (
		known *provider.Instance
		h     *Host
	)
	if rec := p.st.Instances[spec.InstanceID]; rec != nil {
		inst := rec.Instance
		known, h = &inst, p.host(rec.Address)
	}
	p.mu.Unlock()
	if known != nil {
		return p.relaunch(ctx, spec, known, h)
	}
	for {
		hs, err := p.reserve(spec)
		if err != nil {
			return nil, err
		}
		inst, err := p.install(ctx, spec, hs)
		if err == nil {
			return inst, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		p.log.Warn("static provider: host not usable", "address", hs.Address, "error", err)
	}
}

// relaunch is a launch of an instance the provider runs already: one a server restart
// interrupted, repeated with a new bootstrap token. Its host is set up again (setUp is
// idempotent: an agent that runs keeps running, one that does not is started, and the new token
// is where an agent that has not enrolled yet reads it) and the instance is returned as
// recorded (inst, on host h). A host gone from the hosts file (h nil) is not set up.
func (p *Provider) relaunch(ctx context.Context, spec provider.LaunchSpec, inst *provider.Instance, h *Host) (*provider.Instance, error) {
	if h == nil {
		return inst, nil
	}
	_, sup, err := p.setUp(ctx, spec, h)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rec := p.st.Instances[spec.InstanceID]; rec != nil {
		rec.Supervisor, rec.AgentCA, rec.AgentServer = sup, len(spec.AgentCA) > 0, spec.AgentServer
		rec.NodeStack = rec.NodeStack || spec.Containers
		if err := p.save(); err != nil {
			return nil, err
		}
	}
	return inst, nil
}

// reserve picks the first Available host of the spec's type (or of none) and records it InUse.
func (p *Provider) reserve(spec provider.LaunchSpec) (*HostStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	groupKey := spec.ClusterID + "/" + spec.GroupName
	// A launch of this instance that a server restart interrupted holds its host already: the
	// set-up starts again there (it is idempotent), never on a second host.
	for _, h := range p.cfg.Inventory.Hosts {
		if hs := p.st.Hosts[h.Address]; hs != nil && hs.State == InUse && hs.InstanceID == spec.InstanceID {
			return hs, nil
		}
	}
	for _, h := range p.cfg.Inventory.Hosts {
		hs := p.st.Hosts[h.Address]
		if hs == nil || hs.State != Available || (h.InstanceType != "" && h.InstanceType != spec.InstanceType) {
			continue
		}
		p.setHost(hs, InUse, "")
		hs.ClusterName, hs.ClusterID, hs.GroupName, hs.LogicalID, hs.InstanceID = spec.ClusterName, spec.ClusterID, spec.GroupName, spec.LogicalID, spec.InstanceID
		delete(p.short[groupKey], spec.InstanceID)
		return hs, p.save()
	}
	if p.short[groupKey] == nil {
		p.short[groupKey] = map[string]bool{}
	}
	p.short[groupKey][spec.InstanceID] = true
	e := &ShortfallError{Group: spec.GroupName, InstanceType: spec.InstanceType, Missing: len(p.short[groupKey])}
	for _, h := range p.cfg.Inventory.Hosts {
		if h.InstanceType != "" && h.InstanceType != spec.InstanceType {
			continue
		}
		e.Total++
		switch p.st.Hosts[h.Address].State {
		case InUse:
			e.InUse++
		case Quarantined, Unreachable:
			e.Excluded++
		}
	}
	return nil, e
}

// install sets the host up for the instance; on failure the host is Unreachable with the reason.
func (p *Provider) install(ctx context.Context, spec provider.LaunchSpec, hs *HostStatus) (*provider.Instance, error) {
	h := p.host(hs.Address)
	inst, sup, err := p.setUp(ctx, spec, h)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.setHost(hs, Unreachable, "set-up failed: "+err.Error())
		p.save()
		return nil, err
	}
	hs.Hostname = inst.Hostname
	p.st.Instances[spec.InstanceID] = &instRecord{Instance: *inst, ClusterName: spec.ClusterName, Address: h.Address, Supervisor: sup, AgentCA: len(spec.AgentCA) > 0, AgentServer: spec.AgentServer,
		NodeStack: spec.Containers}
	return inst, p.save()
}

// facts are what the provider reads from a host before it installs the agent.
type facts struct {
	hostname, bootID, supervisor, binHash string
	cpus, memKiB, gpus                    int
}

// factsScript prints the facts, a line each.
func (l layout) factsScript() string {
	return `hostname -s
cat ` + l.path(bootIDFile) + `
if [ -d ` + l.path(systemdDir) + ` ]; then echo systemd; else echo process; fi
nproc
awk '/^MemTotal:/ {print $2}' /proc/meminfo
(nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true
sha256sum ` + l.path(BinDir) + `/hale 2>/dev/null | cut -d' ' -f1
`
}

func (p *Provider) facts(ctx context.Context, h *Host) (facts, error) {
	out, err := p.ssh.run(ctx, h, p.layout(h).factsScript(), nil)
	if err != nil {
		return facts{}, err
	}
	l := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for len(l) < 7 {
		l = append(l, "")
	}
	f := facts{hostname: strings.TrimSpace(l[0]), bootID: strings.TrimSpace(l[1]), supervisor: strings.TrimSpace(l[2]), binHash: strings.TrimSpace(l[6])}
	f.cpus, _ = strconv.Atoi(strings.TrimSpace(l[3]))
	f.memKiB, _ = strconv.Atoi(strings.TrimSpace(l[4]))
	f.gpus, _ = strconv.Atoi(strings.TrimSpace(l[5]))
	if f.hostname == "" || f.bootID == "" {
		return f, fmt.Errorf("%s: could not read its hostname and boot id: %q", h.Address, out)
	}
	return f, nil
}

// setUp reads the host, copies hale to it (unless the same binary is there), writes the
// bootstrap token and the agent's start script, and starts the agent.
func (p *Provider) setUp(ctx context.Context, spec provider.LaunchSpec, h *Host) (*provider.Instance, string, error) {
	f, err := p.facts(ctx, h)
	if err != nil {
		return nil, "", err
	}
	l := p.layout(h)
	binDir, confDir := l.path(BinDir), l.path(ConfDir)
	if f.binHash != p.hash {
		bin, err := os.Open(p.cfg.AgentBinary)
		if err != nil {
			return nil, "", err
		}
		_, err = p.ssh.run(ctx, h, "set -e; mkdir -p "+binDir+"; cat > "+binDir+"/hale.new; chmod 755 "+binDir+"/hale.new; mv "+binDir+"/hale.new "+binDir+"/hale", bin)
		bin.Close()
		if err != nil {
			return nil, "", fmt.Errorf("copy hale: %w", err)
		}
	}
	// The token travels on the SSH channel's stdin, never on a command line.
	if _, err := p.ssh.run(ctx, h, "set -e; umask 077; mkdir -p "+confDir+"; cat > "+confDir+"/bootstrap-token", strings.NewReader(spec.AgentToken+"\n")); err != nil {
		return nil, "", fmt.Errorf("write the bootstrap token: %w", err)
	}
	if spec.Containers {
		if err := p.installStack(ctx, h); err != nil {
			return nil, "", err
		}
	}
	if len(spec.AgentCA) > 0 {
		if _, err := p.ssh.run(ctx, h, "set -e; mkdir -p "+confDir+"; cat > "+confDir+"/agent-ca.crt", strings.NewReader(string(spec.AgentCA))); err != nil {
			return nil, "", fmt.Errorf("write the agent CA: %w", err)
		}
	}
	if _, err := p.ssh.run(ctx, h, p.startScript(l, spec, f.supervisor, len(spec.AgentCA) > 0), nil); err != nil {
		return nil, "", fmt.Errorf("start the agent: %w", err)
	}
	ip := h.Address
	if c, err := p.ssh.client(ctx, h); err == nil {
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ip = a.IP.String()
		}
	}
	inst := &provider.Instance{ID: spec.InstanceID, ClusterID: spec.ClusterID, GroupName: spec.GroupName, LogicalID: spec.LogicalID,
		InstanceType: spec.InstanceType, IP: ip, Hostname: f.hostname, State: provider.Running, LaunchTime: time.Now().UTC()}
	p.log.Info("static provider: agent started", "address", h.Address, "hostname", f.hostname, "instance_id", spec.InstanceID,
		"cpus", f.cpus, "memory_mib", f.memKiB/1024, "gpus", f.gpus, "supervisor", f.supervisor)
	return inst, f.supervisor, nil
}

// agentArgs is the agent's command line on a host.
func (p *Provider) agentArgs(l layout, spec provider.LaunchSpec, withCA bool) []string {
	server := spec.AgentServer
	if server == "" {
		server = p.cfg.AgentServer
	}
	args := []string{l.path(BinDir) + "/hale", "agent", "--server", server, "--instance-id", spec.InstanceID,
		"--instance-type", spec.InstanceType, "--state-dir", l.path(StateDir), "--bootstrap-token-file", l.path(ConfDir) + "/bootstrap-token"}
	if withCA {
		args = append(args, "--ca-file", l.path(ConfDir)+"/agent-ca.crt")
	}
	args = append(args, devicePluginArgs(spec)...)
	return append(args, p.cfg.AgentArgs...)
}

// startScript writes the agent's start script and starts it: as the systemd unit
// hale-agent.service where systemd runs (Restart=always; KillMode=process, so that restarting
// the agent leaves the daemons it supervises running), else as hale's supervising loop in a
// session of its own (restarting the agent a second after it exits), whose session id is in
// /run/hale-agent.pid. Starting an agent that runs is a no-op.
func (p *Provider) startScript(l layout, spec provider.LaunchSpec, supervisor string, withCA bool) string {
	quoted := make([]string, 0, 16)
	for _, a := range p.agentArgs(l, spec, withCA) {
		quoted = append(quoted, shellQuote(a))
	}
	binDir := l.path(BinDir)
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nmkdir -p %s %s\ncat > %s/hale-agent-run <<'HALE_EOF'\n#!/bin/sh\n# written by hale (docs/own-machines.md): runs hale's node agent\nexec %s\nHALE_EOF\nchmod 755 %s/hale-agent-run\n",
		binDir, l.path(StateDir), binDir, strings.Join(quoted, " "), binDir)
	if supervisor == "systemd" {
		// The agent starts once the clock is synchronised (time-sync.target, which the wait
		// unit of the host's time daemon holds back until it is): a clock still off after a
		// boot makes munge refuse credentials and certificates look expired, which would
		// look like a broken node. chrony's wait unit is enabled where chrony runs (it gives
		// up after about 10 minutes); systemd-time-wait-sync is left to the operator, since
		// it waits forever where no time server answers.
		fmt.Fprintf(&b, "cat > %s <<'HALE_EOF'\n[Unit]\nDescription=hale node agent (docs/own-machines.md)\nAfter=network-online.target time-sync.target\nWants=network-online.target time-sync.target\n\n[Service]\nExecStart=%s/hale-agent-run\nRestart=always\nRestartSec=1\nKillMode=process\n\n[Install]\nWantedBy=multi-user.target\nHALE_EOF\n"+
			"if systemctl is-active -q chrony.service || systemctl is-active -q chronyd.service; then systemctl enable chrony-wait.service 2>/dev/null || true; fi\n"+
			"systemctl daemon-reload\nsystemctl enable --now hale-agent.service\n",
			l.path(UnitFile), binDir)
		return b.String()
	}
	fmt.Fprintf(&b, "cat > %s/hale-agent-supervise <<'HALE_EOF'\n#!/bin/sh\n# written by hale (docs/own-machines.md): keeps hale's node agent running where systemd does not\necho $$ > %s\nwhile :; do %s/hale-agent-run; sleep 1; done\nHALE_EOF\nchmod 755 %s/hale-agent-supervise\n",
		binDir, l.path(pidFile), binDir, binDir)
	fmt.Fprintf(&b, "if [ -f %s ] && kill -0 \"$(cat %s)\" 2>/dev/null; then exit 0; fi\nsetsid %s/hale-agent-supervise >>%s 2>&1 </dev/null &\n",
		l.path(pidFile), l.path(pidFile), binDir, l.path(AgentLog))
	return b.String()
}

// cleanScript stops the agent and every process of its supervision (the daemons it runs),
// takes the node stack off a host that ran an Eks node (nodeStack: nodestack.ResetScript, which
// needs the agent's daemons gone first), and removes hale's files.
func (l layout) cleanScript(nodeStack bool) string {
	script := l.stopAgentScript()
	if nodeStack {
		script += nodestack.ResetScript
	}
	return script + l.removeFilesScript()
}

// stopAgentScript stops the agent and every daemon it started.
func (l layout) stopAgentScript() string {
	return `if [ -f ` + l.path(UnitFile) + ` ] && [ -d ` + l.path(systemdDir) + ` ]; then
  systemctl kill --signal=KILL hale-agent.service 2>/dev/null || true
  systemctl disable --now hale-agent.service 2>/dev/null || true
  rm -f ` + l.path(UnitFile) + `
  systemctl daemon-reload
fi
if [ -f ` + l.path(pidFile) + ` ]; then
  pkill -KILL -s "$(cat ` + l.path(pidFile) + `)" 2>/dev/null || true
  rm -f ` + l.path(pidFile) + `
fi
pkill -KILL -f '` + l.agentMatch() + `' 2>/dev/null || true
`
}

// removeFilesScript removes hale's files: the agent's, and what it wrote for the lifecycle
// scripts where HyperPod puts it.
func (l layout) removeFilesScript() string {
	return `rm -rf ` + l.path(BinDir) + ` ` + l.path(ConfDir) + ` ` + l.path(StateDir) + ` ` + l.path(AgentLog) + ` ` + l.path(agent.ConfigDir) + ` ` + l.path(agent.LifecycleDir) + `
rmdir ` + l.path("/opt/hale") + ` ` + l.path("/opt/ml") + ` 2>/dev/null || true
`
}

// Terminate stops the instance's agent and what it runs, removes hale's files from the host and
// puts the host back in the pool, or in Quarantined when the instance was replaced for a fault
// (Quarantine). A host that cannot be cleaned goes to Unreachable.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	p.mu.Lock()
	rec := p.st.Instances[id]
	for _, s := range p.short {
		delete(s, id)
	}
	p.mu.Unlock()
	if rec == nil {
		return nil
	}
	h := p.host(rec.Address)
	var err error
	if h != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = p.ssh.run(cctx, h, p.layout(h).cleanScript(rec.NodeStack), nil)
		cancel()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.st.Hosts[rec.Address]
	switch {
	case hs == nil:
	case h == nil:
		delete(p.st.Hosts, rec.Address) // it left the hosts file while in use
	case rec.Quarantine != "":
		p.setHost(hs, Quarantined, rec.Quarantine)
	case err != nil:
		p.setHost(hs, Unreachable, "clean-up after instance "+id+" failed: "+err.Error())
	default:
		p.setHost(hs, Available, "instance "+id+" terminated")
	}
	delete(p.st.Instances, id)
	return p.save()
}

// Reboot reboots the host (systemctl reboot, or reboot where systemd does not run) and returns
// once the host answers SSH again with a new boot id, so that every process of the old boot has
// ended (provider.Provider's contract: the controller must not take the old boot's agent, still
// connected for a moment after the command, for the rebooted one). Where no systemd unit starts
// the agent, Reboot starts it. A host that does not come back within RebootTimeout is marked
// with the reason and Reboot returns an error.
func (p *Provider) Reboot(ctx context.Context, id string) error {
	rec, h, err := p.instance(id)
	if err != nil {
		return err
	}
	before, err := p.ssh.run(ctx, h, "cat "+p.layout(h).path(bootIDFile), nil)
	if err != nil {
		return err
	}
	// Detached and a second late, so that the SSH session ends cleanly first.
	if _, err := p.ssh.run(ctx, h, `setsid sh -c 'sleep 1; if [ -d `+p.layout(h).path(systemdDir)+` ]; then systemctl reboot; else reboot; fi' >/dev/null 2>&1 </dev/null &`, nil); err != nil {
		return err
	}
	p.ssh.forget(h)
	spec := provider.LaunchSpec{InstanceID: rec.ID, InstanceType: rec.InstanceType, AgentServer: rec.AgentServer, Containers: rec.NodeStack}
	return p.awaitBoot(ctx, rec, h, strings.TrimSpace(before), spec)
}

// awaitBoot waits for the host to answer with a new boot id, then starts the agent where no
// systemd unit does. Its limit is RebootTimeout, whatever ctx allows beyond it; while the host
// answers with another SSH host key than known_hosts holds, it waits on without a limit (the
// controller holds the node for an operator: IdentityProblem) and goes on once the key is
// accepted.
func (p *Provider) awaitBoot(ctx context.Context, rec instRecord, h *Host, before string, spec provider.LaunchSpec) error {
	defer p.setIdentity(rec.ID, "")
	deadline := time.Now().Add(p.cfg.RebootTimeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(deadline)): // at once when it has passed
			p.mu.Lock()
			if hs := p.st.Hosts[rec.Address]; hs != nil && hs.InstanceID == rec.ID {
				hs.Reason = fmt.Sprintf("did not come back within %s of a reboot", p.cfg.RebootTimeout)
				p.save()
			}
			p.mu.Unlock()
			return fmt.Errorf("static provider: host %s (instance %s) did not come back within %s of a reboot", h.Address, rec.ID, p.cfg.RebootTimeout)
		case <-time.After(time.Second):
		}
		p.mu.Lock()
		cur := p.st.Instances[rec.ID]
		p.mu.Unlock()
		if cur == nil {
			return nil // terminated meanwhile (a replacement of a host that stayed down)
		}
		out, err := p.ssh.run(ctx, h, "cat "+p.layout(h).path(bootIDFile), nil)
		var hk *HostKeyError
		if errors.As(err, &hk) {
			if p.IdentityProblem(rec.ID) == "" {
				p.log.Warn("static provider: a rebooted host answers with another host key; held for an operator", "address", h.Address, "instance_id", rec.ID, "error", hk)
			}
			p.setIdentity(rec.ID, hk.Error())
		}
		if err != nil && p.IdentityProblem(rec.ID) != "" {
			// Held until the host answers as the machine known_hosts names (a refused or
			// timed-out attempt in between says nothing new): no budget runs meanwhile.
			deadline = time.Now().Add(p.cfg.RebootTimeout)
		}
		if err != nil {
			p.ssh.forget(h)
			continue
		}
		if strings.TrimSpace(out) == before {
			continue
		}
		if cur.Supervisor == "process" {
			if _, err := p.ssh.run(ctx, h, p.startScript(p.layout(h), spec, cur.Supervisor, cur.AgentCA), nil); err != nil {
				p.log.Warn("static provider: start the agent after a reboot", "address", h.Address, "error", err)
				continue
			}
		}
		p.log.Info("static provider: host rebooted", "address", h.Address, "instance_id", rec.ID, "boot_id", strings.TrimSpace(out))
		return nil
	}
}

func (p *Provider) instance(id string) (instRecord, *Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.st.Instances[id]
	if rec == nil {
		return instRecord{}, nil, provider.ErrNotFound
	}
	h := p.host(rec.Address)
	if h == nil {
		return instRecord{}, nil, fmt.Errorf("static provider: host %s of instance %s is not in the hosts file", rec.Address, id)
	}
	return *rec, h, nil
}

// Describe returns the instance as recorded.
func (p *Provider) Describe(ctx context.Context, id string) (*provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.st.Instances[id]
	if rec == nil {
		return nil, provider.ErrNotFound
	}
	inst := rec.Instance
	return &inst, nil
}

// agentRunningScript prints yes when an agent process runs, else no. A process's state is the
// field after its command's name, in parentheses, in /proc/PID/stat.
func (l layout) agentRunningScript() string {
	return `for pid in $(pgrep -f '` + l.agentMatch() + `'); do
  case "$(sed -n 's/.*) \(.\).*/\1/p' /proc/$pid/stat 2>/dev/null)" in
  ""|T|t|Z|X|x) ;;
  *) echo yes; exit 0 ;;
  esac
done
echo no
`
}

// AgentRunning asks the host over SSH whether hale's agent process runs: alive, neither stopped
// (SIGSTOP, a hung agent: pgrep alone would count it) nor a zombie.
func (p *Provider) AgentRunning(ctx context.Context, id string) (bool, error) {
	_, h, err := p.instance(id)
	if err != nil {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := p.ssh.run(cctx, h, p.layout(h).agentRunningScript(), nil)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) == "yes", nil
}

// List returns every instance, by id.
func (p *Provider) List(ctx context.Context) ([]*provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*provider.Instance, 0, len(p.st.Instances))
	for _, rec := range p.st.Instances {
		inst := rec.Instance
		out = append(out, &inst)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ReleaseCluster has nothing to release: hosts return to the pool as their instances end.
func (p *Provider) ReleaseCluster(ctx context.Context, clusterID string) error { return nil }

// InjectKernelLog appends lines to the host's kernel log (/dev/kmsg, as root may), for
// `hale debug inject-fault`.
func (p *Provider) InjectKernelLog(ctx context.Context, id string, lines []string) error {
	_, h, err := p.instance(id)
	if err != nil {
		return err
	}
	_, err = p.ssh.run(ctx, h, "while IFS= read -r l; do printf '%s\\n' \"$l\" >> "+p.layout(h).path("/dev/kmsg")+"; done", strings.NewReader(strings.Join(lines, "\n")+"\n"))
	return err
}
