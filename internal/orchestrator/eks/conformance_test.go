package eks_test

import (
	"testing"

	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/orchestrator/orchestratortest"
)

// TestConformance runs the orchestrator conformance suite on the Eks orchestrator, with
// simulated kubelets (hale makes the Nodes) and with scripted real ones (the node stack's
// commands answered by the machines, the kubelet registering its Node).
func TestConformance(t *testing.T) {
	t.Run("simulated kubelets", func(t *testing.T) {
		s, _ := eksSubject(simulated, eks.Config{})
		orchestratortest.Run(t, s)
	})
	t.Run("real kubelets", func(t *testing.T) {
		s, _ := eksSubject(scripted, eks.Config{})
		orchestratortest.Run(t, s)
	})
}
