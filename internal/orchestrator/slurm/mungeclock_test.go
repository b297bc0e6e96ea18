package slurm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/store"
)

// unmungeOut is what unmunge prints for a credential encoded at enc, decoded at dec.
func unmungeOut(status string, enc, dec time.Time) string {
	line := func(t time.Time) string {
		return fmt.Sprintf("%s (%d)", t.UTC().Format("2006-01-02 15:04:05 -0700"), t.Unix())
	}
	return fmt.Sprintf("STATUS:          %s\nENCODE_HOST:     localhost (127.0.0.1)\nENCODE_TIME:     %s\nDECODE_TIME:     %s\nTTL:             300\nCIPHER:          aes128 (4)\n",
		status, line(enc), line(dec))
}

// A node slurmctld has not responding while its agent answers gets its munge clock checked
// against the controller's: one whose credentials munge refuses as rewound (its clock 10 minutes
// ahead) is node.clock_skew with the offset, and nothing is repaired; one whose munge agrees
// with the controller's is no finding; a node Slurm has in service is not checked (issue 27
// item 5).
func TestMungeClockOfANodeNotResponding(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name, state, status string
		offset              time.Duration
		want                string // in the finding's evidence; "" for none
	}{
		{"rewound", "IDLE+NOT_RESPONDING", "Rewound credential (16)", 10 * time.Minute, "10m0s ahead of the controller's (unmunge: Rewound credential (16)"},
		{"expired", "DOWN+NOT_RESPONDING", "Expired credential (15)", -7 * time.Minute, "7m0s behind the controller's"},
		{"within TTL", "DOWN*", "Success (0)", 90 * time.Second, "1m30s ahead of"},
		{"agrees", "IDLE+NOT_RESPONDING", "Success (0)", 0, ""},
		{"in service", "IDLE", "Rewound credential (16)", 10 * time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, agents := joinFixture(t, store.PhaseReady, now)
			c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE" })
			agents.State = slurmconf.NodeState{Name: joinHost, State: tc.state}
			var mu sync.Mutex
			var ran []string
			agents.Other = func(instanceID string, argv []string) (string, int32, bool) {
				mu.Lock()
				ran = append(ran, instanceID+": "+argv[0])
				mu.Unlock()
				switch {
				case instanceID == slurmtest.GPUInstance && strings.Join(argv, " ") == "munge -n":
					return "MUNGE:AwQFAAA=:\n", 0, true
				case instanceID == slurmtest.CtlInstance && argv[0] == "sh" && argv[len(argv)-1] == "MUNGE:AwQFAAA=:":
					return unmungeOut(tc.status, now.Add(tc.offset), now), 0, true
				}
				return "", 0, false
			}
			ctx := context.Background()
			c.s.poll(ctx, joinCluster, slurmtest.CtlInstance)
			c.s.poll(ctx, joinCluster, slurmtest.CtlInstance)       // again at once: checked once
			if err := c.c.Reconcile(ctx, joinCluster); err != nil { // the round starts the checks
				t.Fatal(err)
			}
			c.c.Wait()
			fs, rs := findingsAndRepairs(t, c)
			if len(rs) != 0 {
				t.Fatalf("repairs %+v: a clock is never repaired", rs)
			}
			if tc.state == "IDLE" && len(ran) != 0 {
				t.Fatalf("a node in service was checked: %q", ran)
			}
			if tc.want == "" {
				if len(fs) != 0 {
					t.Fatalf("findings %+v, want none", fs)
				}
				return
			}
			// One munge on the node, one unmunge on the controller, and the resync of the
			// node's clock (its time daemon's step).
			want := []string{slurmtest.GPUInstance + ": munge", slurmtest.CtlInstance + ": sh", slurmtest.GPUInstance + ": sh"}
			if strings.Join(ran, ",") != strings.Join(want, ",") {
				t.Errorf("commands %q, want %q", ran, want)
			}
			if len(fs) != 1 || fs[0].Fault != clockSkewFault || !strings.Contains(fs[0].Evidence, tc.want) {
				t.Fatalf("findings %+v, want one %s saying %q", fs, clockSkewFault, tc.want)
			}
			if _, ev := gpu1(t, c); !strings.Contains(ev, tc.want) {
				t.Errorf("no event says %q:\n%s", tc.want, ev)
			}
		})
	}
}

func TestParseUnmunge(t *testing.T) {
	enc := time.Unix(1796388139, 0)
	m, ok := parseUnmunge(unmungeOut("Rewound credential (16)", enc, enc.Add(-10*time.Minute)))
	if !ok || !m.refused() || !m.Encode.Equal(enc) || m.Encode.Sub(m.Decode) != 10*time.Minute {
		t.Errorf("got %+v %v", m, ok)
	}
	if _, ok := parseUnmunge("unmunge: Error: Invalid credential format\n"); ok {
		t.Error("an answer without times parsed")
	}
}
