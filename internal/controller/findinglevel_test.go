package controller

import (
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
)

// A finding's event level comes from its decision, except where the catalog marks a fault
// Error: a daemon whose configuration does not parse asks for no node action, yet it is down
// until someone fixes the file.
func TestFindingLevelFollowsTheCatalog(t *testing.T) {
	for _, tc := range []struct {
		fault  string
		action health.Action
		want   api.ClusterEventLevel
	}{
		{"daemon.config_invalid", health.Ignore, api.ClusterEventLevelError},
		{"daemon.exited", health.Ignore, api.ClusterEventLevelInfo},
		{"daemon.crashloop", health.Reboot, api.ClusterEventLevelWarn},
		{"node.clock_skew", health.Ignore, api.ClusterEventLevelWarn},
	} {
		if got := findingLevel(health.Decision{Action: tc.action}, tc.fault); got != tc.want {
			t.Errorf("%s (%s): %s, want %s", tc.fault, tc.action, got, tc.want)
		}
	}
}
