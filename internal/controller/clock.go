package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// A node's clock off from the server's (node.clock_skew, found from its heartbeats by the
// agent server) is fixed by resyncing it, never by a reboot or new hardware (issue 27): hale
// asks the node's own time daemon to step the clock at once (chronyc makestep; a restart of
// systemd-timesyncd, which steps it at its first answer), and says what came of it. The
// heartbeats that follow tell whether it holds; a node whose clock cannot be resynced is left
// to its operator, with the event saying so. Local nodes share the server's kernel clock:
// theirs cannot be skewed, and stepping it would step the host's, so they are left alone.

const clockSkewFault = "node.clock_skew"

// resyncEvery is how often one instance's clock is resynced at most: a daemon that steps it
// and loses it again is the operator's to look at, not a loop's.
const resyncEvery = 10 * time.Minute

// resyncScript steps the clock with the node's time daemon and says which; exit 3 when it has
// none hale knows.
const resyncScript = `if command -v chronyc >/dev/null 2>&1 && chronyc -a makestep >/dev/null 2>&1; then echo "chronyc makestep"
elif [ -d /run/systemd/system ] && systemctl is-active -q systemd-timesyncd 2>/dev/null && systemctl restart systemd-timesyncd; then echo "systemd-timesyncd restarted"
else echo "no chronyd or systemd-timesyncd runs there"; exit 3; fi`

// resyncClock starts the resync of an instance's clock, unless one ran within resyncEvery.
func (c *Controller) resyncClock(clusterID, instanceID string) {
	if c.cfg.Provider == nil || c.cfg.Provider.Capabilities().SharedClock {
		return
	}
	c.mu.Lock()
	if last, ok := c.resynced[instanceID]; ok && c.now().Sub(last) < resyncEvery {
		c.mu.Unlock()
		return
	}
	c.resynced[instanceID] = c.now()
	c.mu.Unlock()
	c.background(key(jobResync, instanceID), clusterID, func(ctx context.Context) {
		out, err := c.runOn(ctx, instanceID, []string{"sh", "-c", resyncScript}, 30*time.Second)
		level, msg := api.ClusterEventLevelInfo, fmt.Sprintf("Clock of instance %s resynced (%s): its next heartbeats tell whether it holds.", instanceID, strings.TrimSpace(out))
		if err != nil {
			level, msg = api.ClusterEventLevelWarn, fmt.Sprintf("hale could not resync the clock of instance %s (%s): resync it on the host (chronyc makestep, or restart systemd-timesyncd).",
				instanceID, strings.TrimSpace(cutTail(out+" "+err.Error(), 300)))
		}
		werr := c.st.Write(ctx, func(tx store.Tx) error {
			cl, n, err := clusterNodeOf(tx, clusterID, instanceID)
			if err != nil {
				return err
			}
			return instanceEvent(tx, cl, n, c.now(), level, "%s", msg)
		})
		if werr != nil && ctx.Err() == nil {
			c.log.Warn("recording a clock resync", "instance_id", instanceID, "error", werr)
		}
	})()
}

// cutTail keeps the last n bytes of s.
func cutTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
