package provider_test

import (
	"testing"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/provider/static"
)

// Each provider's declared capabilities agree with what it implements: a pool of machines that
// outlive instances quarantines them (provider.Quarantiner), and nodes that run real kubelets
// get their pod networks routed (provider.PodRoutes).
func TestCapabilitiesMatchTheInterfaces(t *testing.T) {
	for _, p := range []provider.Provider{(*local.Provider)(nil), (*static.Provider)(nil)} {
		caps := p.Capabilities()
		_, quarantines := p.(provider.Quarantiner)
		_, routes := p.(provider.PodRoutes)
		if caps.SparePool != quarantines {
			t.Errorf("%T: SparePool is %v, and it implements Quarantiner: %v", p, caps.SparePool, quarantines)
		}
		if caps.RealKubelets && !routes {
			t.Errorf("%T: RealKubelets without PodRoutes: the pods of different nodes could not reach each other", p)
		}
	}
}
