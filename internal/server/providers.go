package server

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/provider/static"
)

// providerKind is one provider hale server --provider can name: what it can do (known before
// it is opened: the control plane's settings depend on it) and how it is opened from the
// server's options. Adding a provider is adding its package and a line to providerKinds; the
// rest of hale asks for its capabilities, never its name.
type providerKind struct {
	caps provider.Capabilities
	open func(a *App, o *Options) (provider.Provider, error)
}

// providerKinds are the providers the server knows (a function, not a variable: the openers
// refer back to the options' helpers, which ask providerCaps).
func providerKinds() map[provider.Kind]providerKind {
	return map[provider.Kind]providerKind{
		local.Kind:  {caps: local.Capabilities, open: (*App).openLocal},
		static.Kind: {caps: static.Capabilities, open: (*App).openStatic},
	}
}

// providerCaps is what the provider o names can do (nothing for none, or for an unknown name,
// which openProvider refuses).
func providerCaps(o Options) provider.Capabilities {
	return providerKinds()[provider.Kind(o.Provider)].caps
}

// openProvider opens the provider o names; nil for none.
func (a *App) openProvider(o *Options) (provider.Provider, error) {
	if o.Provider == "" {
		return nil, nil
	}
	kinds := providerKinds()
	k, ok := kinds[provider.Kind(o.Provider)]
	if !ok {
		var names []string
		for n := range kinds {
			names = append(names, string(n))
		}
		slices.Sort(names)
		return nil, fmt.Errorf("unknown provider %q (hale has: %s)", o.Provider, strings.Join(names, ", "))
	}
	return k.open(a, o)
}

// openLocal opens the local provider: nodes are namespaces on this machine, whose agents reach
// the server on the bridge's address at o.AgentPort.
func (a *App) openLocal(o *Options) (provider.Provider, error) {
	if o.AgentPort == 0 {
		o.AgentPort = DefaultAgentPort
	}
	if IsPostgres(o.Store) && o.ProviderDir == "" {
		return nil, errors.New("the local provider on a PostgreSQL store needs --provider-dir DIR: the instances' records, " +
			"one directory every server on the store names, so that whichever server leads knows every node (docs/reliability.md)")
	}
	lc := local.Config{Root: cmp.Or(o.ProviderDir, filepath.Join(o.DataDir, string(local.Kind))), Bridge: o.LocalBridge, Subnet: o.LocalSubnet,
		AgentBinary: o.AgentBinary, AgentPort: o.AgentPort, Shared: IsPostgres(o.Store), Logger: a.log}
	var err error
	if lc.NodeStack, lc.NodeImages, err = nodeStackDirs(*o); err != nil {
		return nil, err
	}
	p, err := local.New(lc)
	if err != nil {
		return nil, err
	}
	// Agents an older hale started speak in clear: restart them with this build's (and the CA).
	if n, err := p.UpgradeAgents(a.AgentCA.CertPEM()); err != nil {
		a.log.Error("restart the agents of an older hale", "error", err)
	} else if n > 0 {
		a.log.Info("restarted the agents an older hale started, with this build and the agent CA", "agents", n)
	}
	return p, nil
}

// openStatic opens the static provider over the hosts file o.Hosts.
func (a *App) openStatic(o *Options) (provider.Provider, error) {
	if IsPostgres(o.Store) {
		// Its pool (which host runs which instance, spares, quarantine) is in memory and in one
		// server's directory: a new leader would not know it and could launch on busy hosts.
		return nil, errors.New("the static provider runs on the embedded store only, one server: several servers on a PostgreSQL store cannot share its pool of hosts yet (docs/reliability.md)")
	}
	if o.AgentListen == "" {
		return nil, errors.New("the static provider needs --agent-listen HOST:PORT: an address of this machine the hosts reach, where their agents connect")
	}
	if o.Hosts == "" {
		return nil, errors.New("the static provider needs --hosts FILE: the machines it may use (docs/own-machines.md)")
	}
	inv, err := static.Load(o.Hosts)
	if err != nil {
		return nil, err
	}
	sc := static.Config{Root: cmp.Or(o.ProviderDir, filepath.Join(o.DataDir, string(static.Kind))), Inventory: inv, KnownHosts: o.KnownHosts,
		AcceptNewHostKeys: o.AcceptNewHostKeys, AgentServer: o.AgentListen, AgentBinary: o.AgentBinary, Logger: a.log}
	if sc.NodeStack, sc.NodeImages, err = nodeStackDirs(*o); err != nil {
		return nil, err
	}
	return static.New(sc)
}
