package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/haleproject/hale/client"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// inject-fault --job: which node of a running Slurm job to break. A scale-up or a repair
// changes which nodes a job runs on, so a fixed --node-id may hit an idle node; Slurm knows.

// slurmJob is what `scontrol show job -o` says about one job, as far as choosing a node goes.
type slurmJob struct {
	ID, State, Reason string
	NodeList          string // Slurm's compressed host list, "" when the job has no nodes
	BatchHost         string // the node running the batch script; "" for salloc/srun jobs (BatchFlag=0)
}

// parseShowJob reads `scontrol show job -o JOBID`: one line of key=value pairs per job record.
// An array or heterogeneous job is several records; asked by one of its ids, Slurm prints them
// all, and the caller must pick one. Values with spaces (JobName, Command) are not needed here,
// and only the first occurrence of a key counts.
func parseShowJob(out string) []slurmJob {
	var jobs []slurmJob
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "JobId=") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				if _, seen := kv[k]; !seen {
					kv[k] = v
				}
			}
		}
		null := func(v string) string {
			if v == "(null)" || v == "None" {
				return ""
			}
			return v
		}
		j := slurmJob{ID: kv["JobId"], State: kv["JobState"], Reason: null(kv["Reason"]), NodeList: null(kv["NodeList"]), BatchHost: null(kv["BatchHost"])}
		if kv["BatchFlag"] == "0" {
			// srun and salloc jobs: Slurm names their first node BatchHost, but no batch
			// script runs there, so it is no worse a target than the others.
			j.BatchHost = ""
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// errJob is an error about the job the user named (not running, unknown, one node): exit 1.
func errJob(format string, args ...any) error { return &exitError{1, fmt.Errorf(format, args...)} }

// faultChoice is the node of a job that inject-fault --job breaks, and why.
type faultChoice struct {
	Node    string // the Slurm node name, which is the node's hostname
	Runs    string // e.g. "job 12 runs on ip-10-1-0-12 (batch host) and ip-10-1-0-13"
	Because string // e.g. "not the batch host, so the job can resume"
}

// Line is what inject-fault prints before it injects; logical is the node's logical id.
func (c faultChoice) Line(logical string) string {
	return fmt.Sprintf("%s; injecting into %s (%s), %s", c.Runs, c.Node, logical, c.Because)
}

// chooseFaultNode picks the node of job j (running on nodes, Slurm's expansion of its NodeList,
// in Slurm's order) to inject a fault into: the first that is not the batch host, because a
// fault on the batch host kills the batch script and so the job, where one elsewhere shows the
// job resume; the batch host itself when batchHost is set.
func chooseFaultNode(j slurmJob, nodes []string, batchHost bool) (faultChoice, error) {
	if j.State != "RUNNING" {
		state := j.State
		if j.Reason != "" {
			state += " (" + j.Reason + ")"
		}
		return faultChoice{}, errJob("job %s is %s, not RUNNING: inject-fault --job needs a running job to pick one of its nodes", j.ID, state)
	}
	if len(nodes) == 0 {
		return faultChoice{}, errJob("job %s is RUNNING but Slurm names no node of it (NodeList=%q)", j.ID, j.NodeList)
	}
	var others []string
	for _, n := range nodes {
		if n != j.BatchHost {
			others = append(others, n)
		}
	}
	runs := fmt.Sprintf("job %s runs on ", j.ID)
	switch {
	case j.BatchHost == "":
		runs += slurm.Hostlist(nodes) + " (no batch host: not an sbatch job)"
	case len(others) == 0:
		runs += j.BatchHost + " (batch host) alone"
	default:
		runs += j.BatchHost + " (batch host) and " + slurm.Hostlist(others)
	}
	switch {
	case batchHost && j.BatchHost == "":
		return faultChoice{}, errJob("%s: --batch-host has nothing to aim at", runs)
	case batchHost:
		return faultChoice{j.BatchHost, runs, "the batch host, as --batch-host asks: the job's batch script dies with it"}, nil
	case len(others) == 0:
		return faultChoice{}, errJob("%s: a fault there ends the job instead of showing it resume; give --batch-host to break it anyway, or use a job on 2 or more nodes", runs)
	case j.BatchHost == "":
		return faultChoice{others[0], runs, "the job's first node"}, nil
	}
	return faultChoice{others[0], runs, "not the batch host, so the job can resume"}, nil
}

// jobFaultNode asks Slurm, on a node of the cluster, where job runs, and chooses the node to
// break.
func jobFaultNode(ctx context.Context, c *client.Client, dataDir, cluster, job string, batchHost bool) (faultChoice, error) {
	ids, err := slurmClientNodes(ctx, c, cluster)
	if err != nil {
		return faultChoice{}, err
	}
	var errs []error
	for _, id := range ids {
		out, err := onNode(ctx, dataDir, id, "scontrol", "show", "job", "-o", job)
		if err != nil {
			if strings.Contains(err.Error(), "Invalid job id") {
				return faultChoice{}, errJob("job %s is unknown to Slurm (scontrol: Invalid job id): it never existed, or ended more than MinJobAge (300 s) ago", job)
			}
			errs = append(errs, err) // its agent is down, or Slurm is not up there: try the next
			continue
		}
		jobs := parseShowJob(out)
		switch len(jobs) {
		case 0:
			return faultChoice{}, errJob("scontrol show job %s printed no job: %s", job, strings.TrimSpace(out))
		case 1:
		default:
			var list []string
			for _, j := range jobs {
				list = append(list, j.ID)
			}
			return faultChoice{}, errJob("job %s is %d jobs to Slurm (an array or heterogeneous job): give one of %s", job, len(jobs), strings.Join(list, ", "))
		}
		var nodes []string
		if jobs[0].NodeList != "" {
			out, err := onNode(ctx, dataDir, id, "scontrol", "show", "hostnames", jobs[0].NodeList)
			if err != nil {
				return faultChoice{}, &exitError{1, err}
			}
			nodes = strings.Fields(out)
		}
		return chooseFaultNode(jobs[0], nodes, batchHost)
	}
	return faultChoice{}, &exitError{1, fmt.Errorf("no node of cluster %s could ask Slurm about job %s: %w", cluster, job, errors.Join(errs...))}
}

// slurmClientNodes lists the cluster's nodes that can ask slurmctld about jobs, in the order to
// try them: the controller's (slurmctld runs there), then the login nodes', then, for a
// cluster whose roles come from provisioning_parameters.json rather than SlurmConfig, the rest.
func slurmClientNodes(ctx context.Context, c *client.Client, cluster string) ([]string, error) {
	var desc struct {
		InstanceGroups []struct {
			InstanceGroupName string
			SlurmConfig       *struct{ NodeType string }
		}
	}
	if err := c.CallJSON(ctx, "DescribeCluster", map[string]any{"ClusterName": cluster}, &desc); err != nil {
		return nil, &exitError{254, err}
	}
	rank := map[string]int{} // group -> order; groups not named come last
	for _, g := range desc.InstanceGroups {
		if g.SlurmConfig == nil {
			continue
		}
		switch g.SlurmConfig.NodeType {
		case "Controller":
			rank[g.InstanceGroupName] = 1
		case "Login":
			rank[g.InstanceGroupName] = 2
		default:
			rank[g.InstanceGroupName] = 0 // a compute node: not asked while the cluster names its roles
		}
	}
	byRank := map[int][]string{}
	in := map[string]any{"ClusterName": cluster, "MaxResults": 100}
	for {
		var page struct {
			ClusterNodeSummaries []struct{ InstanceId, InstanceGroupName string }
			NextToken            string
		}
		if err := c.CallJSON(ctx, "ListClusterNodes", in, &page); err != nil {
			return nil, &exitError{254, err}
		}
		for _, s := range page.ClusterNodeSummaries {
			r, named := rank[s.InstanceGroupName]
			if !named {
				r = 3
			}
			byRank[r] = append(byRank[r], s.InstanceId)
		}
		if page.NextToken == "" {
			break
		}
		in["NextToken"] = page.NextToken
	}
	out := append(append(byRank[1], byRank[2]...), byRank[3]...)
	if len(out) == 0 {
		return nil, &exitError{1, fmt.Errorf("cluster %s has no controller or login node to ask Slurm from", cluster)}
	}
	return out, nil
}

// onNode runs a command inside a node's namespaces, as hale exec does, and returns its
// standard output; a failure carries its standard error.
func onNode(ctx context.Context, dataDir, id string, args ...string) (string, error) {
	argv, err := nodeCommand(dataDir, id, args)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s on node %s: %v: %s", strings.Join(args, " "), id, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
