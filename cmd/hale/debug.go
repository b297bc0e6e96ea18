package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/health"

	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmcli"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
	"github.com/spf13/cobra"
)

func newDebugCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Tools for trying hale's resilience (local provider)"}
	cmd.AddCommand(newInjectFaultCommand())
	return cmd
}

func newInjectFaultCommand() *cobra.Command {
	var cf clientFlags
	var cluster, node, dataDir, text string
	var logLines []string
	var xid, gpu, loseGPU int
	var job, throttle string
	var killAgent, killSlurmd, fillDisk, stopJob, noWait, batchHost bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "inject-fault --cluster-name NAME (--node-id ID | --job JOBID [--batch-host]) (--xid N [--gpu K] | --log-line LINE | --kill-agent | --kill-slurmd | --lose-gpu K | --fill-disk | --throttle KIND [--gpu K] | --stop-job)",
		Short: "Break a node the way hardware breaks, and watch hale repair it",
		Long: `Inject a fault into a node, through the paths hale's agent watches on every node. On the
local provider's nodes every kind below works; on the static provider's hosts --xid and
--log-line do (written to the host's /dev/kmsg over SSH, through the server):

  --xid N [--gpu K]  an NVRM Xid line for GPU K in the node's kernel log (a local node's
                     /var/log/messages, a host's /dev/kmsg)
  --log-line LINE    any kernel log line (a GSP timeout, an I/O error, ...)
  --kill-agent       SIGKILL the node's agent: its heartbeats stop, the node is dead
  --kill-slurmd      SIGKILL slurmd: the agent starts it again (three times a minute is a crash loop)
  --lose-gpu K       GPU K disappears from the node (and stays gone across reboots)
  --fill-disk        fill the node's own disk (/opt/dlami/nvme)
  --throttle KIND    GPU K (--gpu) holds its clocks down, KIND thermal (hot) or power, until it
                     is reset or the node reboots: DCGM's violation counters and HyperPod's
                     GPU alerts see it; hale repairs nothing for it, so it does not wait
  --stop-job         stop (SIGSTOP) the node's job step processes: the job hangs in its next
                     collective while every node check passes; srun --run-policy finds it
                     (docs/autoresume.md, "Run policies"). Nothing is repaired, so it does not wait.

The node is --node-id (an instance id, hostname, logical id or Kubernetes Node name), or one of a running Slurm job's
nodes with --job: hale asks Slurm (scontrol show job, on the cluster's controller or login
node) where the job runs and picks the first of its nodes that is not its batch host. The batch
host runs the job's batch script, so a fault there ends the job instead of showing it resume;
--batch-host aims at it on purpose. A job that is not running, or runs on its batch host alone
(without --batch-host), is an error.

Then, unless --no-wait, it prints the node's events as hale handles the fault: the finding and
the action the catalog and policy chose, the drain, the reboot or replacement, the checks and
the resume, until the repair ends (or the fault turns out to need no action). Run as root on
the server's machine.`,
		Example: `  hale debug inject-fault --cluster-name demo --node-id ip-10-222-0-13 --xid 79
  hale debug inject-fault --cluster-name demo --job 12 --xid 79        # a node of job 12 that is not its batch host
  hale debug inject-fault --cluster-name demo --job 12 --batch-host --kill-agent
  hale debug inject-fault --cluster-name demo --job 12 --stop-job     # job 12 hangs
  hale debug inject-fault --cluster-name demo --node-id gpu-1 --xid 13 --no-wait
  hale debug inject-fault --cluster-name demo --node-id ip-10-222-0-11 --kill-agent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			f := local.Fault{Xid: xid, GPU: gpu, Text: text, LogLine: strings.Join(logLines, "\n"), KillAgent: killAgent, KillSlurmd: killSlurmd, LoseGPU: loseGPU, FillDisk: fillDisk, StopJob: stopJob, Throttle: throttle}
			kinds := 0
			for _, set := range []bool{xid > 0, len(logLines) > 0, killAgent, killSlurmd, loseGPU >= 0, fillDisk, stopJob, throttle != ""} {
				if set {
					kinds++
				}
			}
			if kinds != 1 {
				return &exitError{Code: 252, Err: errors.New("give exactly one of --xid, --log-line, --kill-agent, --kill-slurmd, --lose-gpu, --fill-disk, --throttle, --stop-job")}
			}
			switch {
			case node != "" && job != "":
				return &exitError{Code: 252, Err: errors.New("give --node-id or --job, not both")}
			case node == "" && job == "":
				return &exitError{Code: 252, Err: errors.New("give the node to break: --node-id ID, or --job JOBID for one of a running job's nodes")}
			case batchHost && job == "":
				return &exitError{Code: 252, Err: errors.New("--batch-host goes with --job: it picks the job's batch host")}
			}
			c, err := cf.client(ctx)
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			out := cmd.OutOrStdout()
			if job != "" || killSlurmd {
				if err := needsSlurm(ctx, c, cluster, job != ""); err != nil {
					return err
				}
			}
			var choice slurmcli.FaultChoice
			if job != "" {
				if choice, err = jobFaultNode(ctx, c, dataDir, cluster, job, batchHost); err != nil {
					return err
				}
				node = choice.Node
			}
			id, err := resolveNode(ctx, &cf, cluster, node)
			if err != nil {
				return err
			}
			group, logical, err := nodeIdentity(ctx, c, cluster, id)
			if err != nil {
				return err
			}
			if job != "" {
				fmt.Fprintln(out, choice.Line(logical))
			}
			start := time.Now()
			what, err := local.InjectFault(providerRoot(dataDir, string(local.Kind)), id, f)
			if errors.Is(err, local.ErrNotLocalNode) && (f.Xid > 0 || f.LogLine != "") {
				// Another machine (the static provider's host): its kernel log, through the server.
				what, err = injectKernelLog(ctx, c, id, f)
			}
			if err != nil {
				return &exitError{Code: 1, Err: err}
			}
			fmt.Fprintf(out, "[%6.2fs] injected into %s (%s): %s\n", 0.0, id, logical, what)
			if p := repairPause(ctx, c, cluster); p != nil {
				// Said at once: hale will record the fault and drain the node, and repair it
				// only once an operator resumes.
				fmt.Fprintf(out, "Automatic repairs of %s are PAUSED since %s (%s on %s): hale records the fault and drains the node, and repairs it once they are resumed: hale repairs resume --cluster-name %s\n",
					cluster, p.Since.Format(time.RFC3339), p.Fault, strings.Join(p.Nodes, ", "), cluster)
			}
			if noWait || stopJob || throttle != "" {
				return nil
			}
			return watchRepair(ctx, c, out, cluster, group, logical, id, start, timeout)
		},
	}
	cf.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&cluster, "cluster-name", "", "cluster name or ARN (required)")
	fl.StringVar(&node, "node-id", "", "instance id, hostname, logical id or Kubernetes Node name of the node (or --job)")
	fl.StringVar(&job, "job", "", "a running Slurm job: break one of its nodes that is not its batch host (or --node-id)")
	fl.BoolVar(&batchHost, "batch-host", false, "with --job: break the job's batch host, which ends the job's batch script")
	fl.StringVar(&dataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "the server's data directory (env HALE_DATA_DIR)")
	fl.IntVar(&xid, "xid", 0, "write an NVRM Xid line with this Xid")
	fl.IntVar(&gpu, "gpu", 0, "the GPU of --xid or --throttle")
	fl.StringVar(&text, "text", "", "the text of the --xid line (default: the catalog's meaning)")
	fl.StringArrayVar(&logLines, "log-line", nil, "write this kernel log line (repeat it for several lines, written at once)")
	fl.BoolVar(&killAgent, "kill-agent", false, "kill the node's agent")
	fl.BoolVar(&killSlurmd, "kill-slurmd", false, "kill the node's slurmd")
	fl.IntVar(&loseGPU, "lose-gpu", -1, "take this GPU away from the node")
	fl.BoolVar(&fillDisk, "fill-disk", false, "fill the node's disk")
	fl.StringVar(&throttle, "throttle", "", "make the --gpu GPU throttle: thermal or power")
	fl.BoolVar(&stopJob, "stop-job", false, "stop the node's job step processes (the job hangs)")
	fl.BoolVar(&noWait, "no-wait", false, "inject and return, without watching hale handle it")
	fl.DurationVar(&timeout, "wait-timeout", 5*time.Minute, "how long to watch")
	cmd.MarkFlagRequired("cluster-name")
	return cmd
}

// needsSlurm refuses --job and --kill-slurmd on a cluster Kubernetes orchestrates, with what
// to do instead, rather than failing on a node's missing Slurm.
func needsSlurm(ctx context.Context, c *client.Client, cluster string, job bool) error {
	var d struct {
		Orchestrator *struct{ Eks *struct{ ClusterArn string } }
	}
	if err := c.CallJSON(ctx, "DescribeCluster", map[string]any{"ClusterName": cluster}, &d); err != nil {
		return &exitError{Code: 254, Err: err}
	}
	if d.Orchestrator == nil || d.Orchestrator.Eks == nil {
		return nil
	}
	if job {
		return &exitError{Code: 252, Err: fmt.Errorf("--job names a Slurm job, and cluster %s is orchestrated by Kubernetes (Eks): pass the Node of one of the job's pods as --node-id (kubectl get pod POD -o jsonpath='{.spec.nodeName}')", cluster)}
	}
	return &exitError{Code: 252, Err: fmt.Errorf("--kill-slurmd: cluster %s is orchestrated by Kubernetes (Eks) and its nodes run no slurmd", cluster)}
}

// nodeIdentity returns the node's group and logical id.
func nodeIdentity(ctx context.Context, c *client.Client, cluster, id string) (group, logical string, err error) {
	var d struct {
		NodeDetails struct{ InstanceGroupName, NodeLogicalId string }
	}
	if err := c.CallJSON(ctx, "DescribeClusterNode", map[string]any{"ClusterName": cluster, "NodeId": id}, &d); err != nil {
		return "", "", &exitError{Code: 254, Err: err}
	}
	return d.NodeDetails.InstanceGroupName, d.NodeDetails.NodeLogicalId, nil
}

// nothingNewAfter is how long watchRepair waits for a first event about the node: every
// monitor reports within a few seconds (a killed agent's heartbeats within 3).
const nothingNewAfter = 15 * time.Second

// watchRepair prints the node's events from start until its repair ends, or until a finding
// that asks for nothing.
func watchRepair(ctx context.Context, c *client.Client, out io.Writer, cluster, group, logical, id string, start time.Time, timeout time.Duration) error {
	ids := map[string]bool{id: true}
	seen := map[string]bool{}
	deadline := time.Now().Add(timeout)
	quietSince := time.Time{}
	for time.Now().Before(deadline) {
		// A replacement has a new instance id under the same logical id.
		var nodes struct {
			ClusterNodeSummaries []struct{ InstanceId, NodeLogicalId string }
		}
		if c.CallJSON(ctx, "ListClusterNodes", map[string]any{"ClusterName": cluster, "InstanceGroupNameContains": group, "IncludeNodeLogicalIds": true}, &nodes) == nil {
			for _, n := range nodes.ClusterNodeSummaries {
				if n.NodeLogicalId == logical {
					ids[n.InstanceId] = true
				}
			}
		}
		var page struct {
			Events []struct {
				EventId, InstanceId, Description string
				EventTime                        float64
			}
		}
		in := map[string]any{"ClusterName": cluster, "InstanceGroupName": group, "SortOrder": "Ascending", "MaxResults": 100,
			"EventTimeAfter": float64(start.UnixMilli()) / 1000}
		if err := c.CallJSON(ctx, "ListClusterEvents", in, &page); err != nil {
			return &exitError{Code: 254, Err: err}
		}
		for _, ev := range page.Events {
			if seen[ev.EventId] || !ids[ev.InstanceId] {
				continue
			}
			seen[ev.EventId] = true
			at := time.UnixMilli(int64(ev.EventTime * 1000))
			d := ev.Description
			if head, tl, ok := strings.Cut(d, " Timeline: "); ok {
				// A repair's timeline: one step a line.
				fmt.Fprintf(out, "[%6.2fs] %s Timeline:\n", at.Sub(start).Seconds(), head)
				for _, step := range strings.Split(tl, "; +") {
					fmt.Fprintf(out, "             +%s\n", strings.TrimPrefix(step, "+"))
				}
			} else {
				fmt.Fprintf(out, "[%6.2fs] %s\n", at.Sub(start).Seconds(), d)
			}
			switch {
			case strings.HasPrefix(d, "Repair ") && (strings.Contains(d, " done in ") || strings.Contains(d, " failed: ")),
				strings.Contains(d, "is quarantined"), strings.Contains(d, "NodeRecovery is None"):
				return nil
			case strings.HasPrefix(d, "Health: ") && strings.Contains(d, "No node action"):
				quietSince = time.Now()
			case strings.HasPrefix(d, "Repair ") && strings.Contains(d, " waits, the node drained: automatic repairs of the cluster are paused"):
				// Nothing more happens until an operator resumes (the event says how).
				return nil
			}
		}
		if !quietSince.IsZero() && time.Since(quietSince) > 3*time.Second {
			fmt.Fprintln(out, "hale took no action on the node: the fault needs none.")
			return nil
		}
		if len(seen) == 0 && time.Since(start) > nothingNewAfter {
			fmt.Fprintf(out, "hale recorded nothing new about the node within %s: what was injected matched no fault, or was part of a fault found in the %s before it (one episode; see docs/health.md).\n",
				nothingNewAfter, health.Span(health.Default().Policy.EpisodeWindow))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return &exitError{Code: 1, Err: fmt.Errorf("no end of the repair within %s", timeout)}
}

// repairPause is the cluster's pause of automatic repairs, nil when they run (or the server
// cannot say).
func repairPause(ctx context.Context, c *client.Client, cluster string) *store.RepairPause {
	body, err := c.Get(ctx, server.RepairsPath, url.Values{"cluster-name": {cluster}})
	if err != nil {
		return nil
	}
	var st controller.RepairsStatus
	if json.Unmarshal(body, &st) != nil {
		return nil
	}
	return st.Paused
}

// injectKernelLog appends f's kernel lines to the node's kernel log through the server, whose
// provider reaches the node's machine (the static provider: /dev/kmsg over SSH).
func injectKernelLog(ctx context.Context, c *client.Client, id string, f local.Fault) (string, error) {
	lines := strings.Split(strings.TrimRight(f.LogLine, "\n"), "\n")
	if f.Xid > 0 {
		lines = []string{local.XidLine(f)}
	}
	in, _ := json.Marshal(server.KernelLogInjection{InstanceID: id, Lines: lines})
	if _, err := c.Post(ctx, server.KernelLogPath, in); err != nil {
		return "", err
	}
	return "wrote to its kernel log (/dev/kmsg): " + strings.Join(lines, " | "), nil
}
