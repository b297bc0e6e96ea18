package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/pflag"
)

// settings are the server flags that decide where a data directory's nodes live and where their
// lifecycle scripts come from. The server keeps the ones it ran with in DATA_DIR/server.json,
// and a later `hale server` on the same directory takes them for every such flag it is not
// given: restarted after a crash (even of a `hale up`), it finds its nodes, bridge and scripts
// where they were.
type settings struct {
	Provider            string `json:"provider"`
	ObjectStore         string `json:"object_store,omitempty"`
	ObjectStoreEndpoint string `json:"object_store_endpoint,omitempty"`
	LocalBridge         string `json:"local_bridge,omitempty"`
	LocalSubnet         string `json:"local_subnet,omitempty"`
	AgentPort           int    `json:"agent_port,omitempty"`
	// ProviderDir is --provider-dir (servers on one store share it), "" for DATA_DIR/<provider>.
	ProviderDir string `json:"provider_dir,omitempty"`
}

func settingsPath(dataDir string) string { return filepath.Join(dataDir, "server.json") }

// recallSettings fills the options whose flags were not given from DATA_DIR/server.json.
func recallSettings(f *pflag.FlagSet, o *server.Options) {
	b, err := os.ReadFile(settingsPath(o.DataDir))
	if err != nil {
		return
	}
	var s settings
	if json.Unmarshal(b, &s) != nil {
		return
	}
	take := func(flag string, dst *string, v string) {
		if !f.Changed(flag) && v != "" {
			*dst = v
		}
	}
	if !f.Changed("provider") {
		o.Provider = s.Provider
	}
	take("object-store", &o.ObjectStore, s.ObjectStore)
	take("object-store-endpoint", &o.ObjectStoreEndpoint, s.ObjectStoreEndpoint)
	take("local-bridge", &o.LocalBridge, s.LocalBridge)
	take("local-subnet", &o.LocalSubnet, s.LocalSubnet)
	take("provider-dir", &o.ProviderDir, s.ProviderDir)
	if !f.Changed("agent-port") && s.AgentPort != 0 {
		o.AgentPort = s.AgentPort
	}
}

// rememberSettings writes the options a server started with to DATA_DIR/server.json.
func rememberSettings(o server.Options, objectStore string) {
	abs, err := filepath.Abs(objectStore)
	if err != nil {
		abs = objectStore
	}
	s := settings{Provider: o.Provider, ObjectStore: abs, ObjectStoreEndpoint: o.ObjectStoreEndpoint,
		LocalBridge: o.LocalBridge, LocalSubnet: o.LocalSubnet, AgentPort: o.AgentPort}
	if o.ProviderDir != "" {
		if s.ProviderDir, err = filepath.Abs(o.ProviderDir); err != nil {
			s.ProviderDir = o.ProviderDir
		}
	}
	if o.ObjectStoreEndpoint != "" {
		s.ObjectStore = ""
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	os.WriteFile(settingsPath(o.DataDir), b, 0o600)
}

// providerRoot is where the server of dataDir keeps a provider's records of its instances: its
// --provider-dir as server.json remembers it, else DATA_DIR/<kind>. The commands that reach
// nodes themselves (exec, debug, down) look there.
func providerRoot(dataDir, kind string) string {
	if b, err := os.ReadFile(settingsPath(dataDir)); err == nil {
		var s settings
		if json.Unmarshal(b, &s) == nil && s.ProviderDir != "" && (s.Provider == kind || s.Provider == "") {
			return s.ProviderDir
		}
	}
	return filepath.Join(dataDir, kind)
}
