package kubeplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// RegistryPort is the port of the OCI registry on Config.Address: Docker's and distribution's
// customary one, so that a user pushes to <address>:5000 as to any self-hosted registry.
const RegistryPort = 5000

// startRegistry runs the CNCF distribution registry (scripts/k8s-tools.sh builds it from its
// module as bin/k8s/registry) on Config.Address:RegistryPort, plain HTTP (the address is on
// hale's own bridge, which nothing outside the machine reaches), its blobs under Dir/registry
// so that pushed images outlive a restart; deletes are allowed (a user's old tags can go).
// It returns once the registry answers /v2/.
func (cp *ControlPlane) startRegistry(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(cp.cfg.Bin, "registry")); err != nil {
		return fmt.Errorf("kubeplane: %s: %w", filepath.Join(cp.cfg.Bin, "registry"), ErrNotBuilt)
	}
	addr := net.JoinHostPort(cp.cfg.Address, strconv.Itoa(RegistryPort))
	conf := filepath.Join(cp.cfg.Dir, "registry.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog: {disabled: true}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http:
  addr: %s
`, filepath.Join(cp.cfg.Dir, "registry"), addr)), 0o600); err != nil {
		return err
	}
	// No OpenTelemetry exporter: it would dial a collector on loopback that is not there.
	if err := cp.runEnv("registry", []string{"OTEL_TRACES_EXPORTER=none"}, "serve", conf); err != nil {
		return err
	}
	proc := cp.procs[len(cp.procs)-1]
	deadline := time.Now().Add(cp.cfg.ReadyTimeout)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cp.registry = addr
				return nil
			}
		}
		if proc.ProcessState != nil || time.Now().After(deadline) {
			return fmt.Errorf("kubeplane: the registry on %s does not answer (%v); see %s", addr, err, filepath.Join(cp.cfg.Dir, "logs", "registry.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Registry is the OCI registry's host:port ("" when the control plane has no Config.Address):
// users push there, and nodes pull from it as nodestack.RegistryName too.
func (cp *ControlPlane) Registry() string { return cp.registry }
