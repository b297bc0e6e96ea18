package static

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/provider"
)

// HostState is where a host of the pool stands.
type HostState string

// Host states, as `hale hosts list` shows them.
const (
	// Available: in the pool, free for an instance group of its type.
	Available HostState = "Available"
	// InUse: a node of a cluster runs on it.
	InUse HostState = "InUse"
	// Quarantined: a node on it was replaced for a fault; it stays out of the pool until an
	// operator returns it (`hale hosts return ADDRESS`).
	Quarantined HostState = "Quarantined"
	// Unreachable: hale could not reach it over SSH, or could not set it up or clean it up;
	// `hale hosts return ADDRESS` puts it back once it is fixed.
	Unreachable HostState = "Unreachable"
)

// HostStatus is one host of the pool, as `hale hosts list --output json` prints it.
type HostStatus struct {
	Address      string            `json:"Address"`
	Port         int               `json:"Port"`
	User         string            `json:"User,omitempty"`
	KeyFile      string            `json:"KeyFile,omitempty"` // the path of the SSH key hale logs in with
	State        HostState         `json:"State"`
	InstanceType string            `json:"InstanceType,omitempty"`
	Labels       map[string]string `json:"Labels,omitempty"`
	Hostname     string            `json:"Hostname,omitempty"`
	ClusterName  string            `json:"ClusterName,omitempty"`
	ClusterID    string            `json:"ClusterId,omitempty"`
	GroupName    string            `json:"InstanceGroupName,omitempty"`
	LogicalID    string            `json:"NodeLogicalId,omitempty"`
	InstanceID   string            `json:"InstanceId,omitempty"`
	// Reason says why the host is in its state (the fault that quarantined it, the SSH error).
	Reason string    `json:"Reason,omitempty"`
	Since  time.Time `json:"Since"`
}

// instRecord is what the provider keeps of an instance: the instance and its host.
type instRecord struct {
	provider.Instance
	ClusterName string `json:"ClusterName"`
	Address     string `json:"Address"`
	// Supervisor is how the agent is kept running: "systemd" (a unit) or "process" (hale's
	// supervising loop, where systemd does not run).
	Supervisor string `json:"Supervisor"`
	// AgentCA: the agent was given the server's CA certificate (--ca-file).
	AgentCA bool `json:"AgentCA,omitempty"`
	// AgentServer is the agent's --server (the launch's).
	AgentServer string `json:"AgentServer,omitempty"`
	// Quarantine, when set, sends the host to Quarantined at termination, with this reason.
	Quarantine string `json:"Quarantine,omitempty"`
	// NodeStack: the host runs an Eks node, with the node stack hale copied (nodestack.go),
	// which Terminate takes off.
	NodeStack bool `json:"NodeStack,omitempty"`
}

// poolState is DATA_DIR/static/pool.json.
type poolState struct {
	// KnownHosts is the known_hosts file the hosts' keys are checked against (for `hale exec`,
	// which logs in as hale does).
	KnownHosts string                 `json:"KnownHosts,omitempty"`
	Hosts      map[string]*HostStatus `json:"Hosts"`     // by address
	Instances  map[string]*instRecord `json:"Instances"` // by instance id
}

func (p *Provider) statePath() string { return filepath.Join(p.cfg.Root, "pool.json") }

// load reads the pool's state and reconciles it with the hosts file: new hosts join as
// Available; hosts gone from the file leave unless a node runs on them.
func (p *Provider) load() error {
	st := poolState{Hosts: map[string]*HostStatus{}, Instances: map[string]*instRecord{}}
	b, err := os.ReadFile(p.statePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("static provider: %s: %w", p.statePath(), err)
		}
	case !os.IsNotExist(err):
		return err
	}
	if st.Hosts == nil {
		st.Hosts = map[string]*HostStatus{}
	}
	if st.Instances == nil {
		st.Instances = map[string]*instRecord{}
	}
	inFile := map[string]bool{}
	for i := range p.cfg.Inventory.Hosts {
		h := &p.cfg.Inventory.Hosts[i]
		inFile[h.Address] = true
		hs := st.Hosts[h.Address]
		if hs == nil {
			hs = &HostStatus{Address: h.Address, State: Available, Since: time.Now().UTC()}
			st.Hosts[h.Address] = hs
		}
		hs.Port, hs.User, hs.KeyFile, hs.InstanceType, hs.Labels = h.Port, h.User, h.KeyFile, h.InstanceType, h.Labels
	}
	for a, hs := range st.Hosts {
		if !inFile[a] {
			if hs.State == InUse {
				hs.Reason = "not in the hosts file any more; it leaves the pool when its node ends"
				continue
			}
			delete(st.Hosts, a)
		}
	}
	st.KnownHosts = p.cfg.KnownHosts
	p.st = st
	return p.save()
}

// save writes the state atomically. Callers hold p.mu.
func (p *Provider) save() error {
	b, err := json.MarshalIndent(p.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.statePath())
}

// setHost moves a host to a state, with why. Callers hold p.mu.
func (p *Provider) setHost(hs *HostStatus, state HostState, reason string) {
	hs.State, hs.Reason, hs.Since = state, reason, time.Now().UTC()
	if state != InUse {
		hs.ClusterName, hs.ClusterID, hs.GroupName, hs.LogicalID, hs.InstanceID = "", "", "", "", ""
	}
}

// Hosts returns every host of the pool, in the hosts file's order.
func (p *Provider) Hosts() []HostStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	order := map[string]int{}
	for i, h := range p.cfg.Inventory.Hosts {
		order[h.Address] = i
	}
	out := make([]HostStatus, 0, len(p.st.Hosts))
	for _, hs := range p.st.Hosts {
		out = append(out, *hs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		oi, iok := order[out[i].Address]
		oj, jok := order[out[j].Address]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return out[i].Address < out[j].Address
	})
	return out
}

// ErrHostInUse: a host a node runs on cannot be returned to the pool.
var ErrHostInUse = fmt.Errorf("static provider: the host runs a node")

// Return puts a Quarantined or Unreachable host back in the pool, after an operator fixed it.
// An Available host is left as it is; an unknown address is provider.ErrNotFound.
func (p *Provider) Return(address string) (HostStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.st.Hosts[address]
	if hs == nil {
		return HostStatus{}, fmt.Errorf("%w: no host %s in the hosts file", provider.ErrNotFound, address)
	}
	switch hs.State {
	case InUse:
		return *hs, fmt.Errorf("%w: %s runs node %s of cluster %s (instance %s); it returns to the pool when that node ends",
			ErrHostInUse, address, hs.LogicalID, hs.ClusterName, hs.InstanceID)
	case Quarantined, Unreachable:
		p.setHost(hs, Available, fmt.Sprintf("returned to the pool by an operator (it was %s: %s)", hs.State, hs.Reason))
	}
	return *hs, p.save()
}

// Quarantine marks the instance's host so that, when the instance is terminated (a
// replacement), the host goes to Quarantined with evidence as its reason instead of back to the
// pool. It implements provider.Quarantiner.
func (p *Provider) Quarantine(id, evidence string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.st.Instances[id]
	if rec == nil {
		return nil
	}
	rec.Quarantine = evidence
	return p.save()
}

// SSHCommand is the ssh command line that logs in to the host of instance id as hale does (its
// key, port, user and known_hosts file), read from the pool's state under root
// (DATA_DIR/static), with args as the remote command (none: a login shell). It is
// provider.ErrNotFound when no host of the pool runs the instance.
func SSHCommand(root, id string, args []string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "pool.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", provider.ErrNotFound, err)
	}
	var st poolState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	for _, hs := range st.Hosts {
		if hs.InstanceID != id || hs.State != InUse {
			continue
		}
		argv := []string{"ssh", "-p", fmt.Sprint(hs.Port), "-o", "BatchMode=yes"}
		if hs.KeyFile != "" {
			argv = append(argv, "-i", hs.KeyFile)
		}
		if st.KnownHosts != "" {
			argv = append(argv, "-o", "UserKnownHostsFile="+st.KnownHosts)
		}
		if len(args) == 0 {
			argv = append(argv, "-t")
		}
		argv = append(argv, cmp.Or(hs.User, DefaultUser)+"@"+hs.Address)
		if len(args) == 0 {
			return argv, nil
		}
		// ssh joins its arguments with spaces into one line for the remote shell, which splits
		// it again: sh -c 'echo one; echo two' would arrive as sh -c echo one; echo two. Each
		// argument is quoted for that shell, so the host runs exactly args.
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		return append(argv, "--", strings.Join(quoted, " ")), nil
	}
	return nil, fmt.Errorf("%w: no host of the pool under %s runs instance %s", provider.ErrNotFound, root, id)
}
