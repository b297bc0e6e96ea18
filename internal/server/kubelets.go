package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator/eks"
)

// Kubelets, the values of Options.Kubelets.
const (
	KubeletsSimulated = "simulated"
	KubeletsReal      = "real"
)

// realKubelets reports whether the local provider's Eks nodes run real kubelets.
func realKubelets(o Options) bool {
	return o.Kubelets == KubeletsReal && o.Provider == "local" && o.Kubernetes != ""
}

// eksConfig is the Eks orchestrator's configuration: kwok plays the local provider's kubelets,
// unless they are real (Options.Kubelets).
func (a *App) eksConfig(o Options) eks.Config {
	if realKubelets(o) {
		bin, _ := kubeBin(o)
		return eks.Config{NodeStack: &nodeStack{a: a, pause: filepath.Join(bin, "pause")}}
	}
	return eks.Config{SimulatedKubelets: o.Provider == "local"}
}

// nodeStack gives Eks nodes their kubelets' files from the local control plane (eks.NodeStack).
type nodeStack struct {
	a     *App
	pause string // Kubernetes' pause program, for the pause image
}

// NodeFiles implements eks.NodeStack.
func (s *nodeStack) NodeFiles(n nodestack.Node, hostname string) (map[string]nodestack.File, error) {
	if s.a.kube == nil {
		return nil, fmt.Errorf("no Kubernetes control plane runs (hale server --kubernetes local)")
	}
	ip := net.ParseIP(n.IP)
	if ip == nil {
		return nil, fmt.Errorf("node %s: address %q", n.Name, n.IP)
	}
	c, err := s.a.kube.NodeCredentials(n.Name, ip, hostname)
	if err != nil {
		return nil, err
	}
	pause, err := os.ReadFile(s.pause)
	if err != nil {
		return nil, fmt.Errorf("the pause program (scripts/k8s-tools.sh builds it): %w", err)
	}
	archive, err := nodestack.PauseArchive(pause)
	if err != nil {
		return nil, err
	}
	files := nodestack.Files(n, *c)
	files[nodestack.PauseArchivePath] = nodestack.File{Content: archive, Mode: 0o644}
	return files, nil
}
