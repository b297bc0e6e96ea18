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
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmcli"
)

// jobFaultNode asks Slurm, on a node of the cluster, where job runs, and chooses the node to
// break.
func jobFaultNode(ctx context.Context, c *client.Client, dataDir, cluster, job string, batchHost bool) (slurmcli.FaultChoice, error) {
	ids, err := slurmClientNodes(ctx, c, cluster)
	if err != nil {
		return slurmcli.FaultChoice{}, err
	}
	var errs []error
	for _, id := range ids {
		out, err := onNode(ctx, dataDir, id, "scontrol", "show", "job", "-o", job)
		if err != nil {
			if strings.Contains(err.Error(), "Invalid job id") {
				return slurmcli.FaultChoice{}, slurmcli.JobError("job %s is unknown to Slurm (scontrol: Invalid job id): it never existed, or ended more than MinJobAge (300 s) ago", job)
			}
			errs = append(errs, err) // its agent is down, or Slurm is not up there: try the next
			continue
		}
		jobs := slurmcli.ParseShowJob(out)
		switch len(jobs) {
		case 0:
			return slurmcli.FaultChoice{}, slurmcli.JobError("scontrol show job %s printed no job: %s", job, strings.TrimSpace(out))
		case 1:
		default:
			var list []string
			for _, j := range jobs {
				list = append(list, j.ID)
			}
			return slurmcli.FaultChoice{}, slurmcli.JobError("job %s is %d jobs to Slurm (an array or heterogeneous job): give one of %s", job, len(jobs), strings.Join(list, ", "))
		}
		var nodes []string
		if jobs[0].NodeList != "" {
			out, err := onNode(ctx, dataDir, id, "scontrol", "show", "hostnames", jobs[0].NodeList)
			if err != nil {
				return slurmcli.FaultChoice{}, &exitError{Code: 1, Err: err}
			}
			nodes = strings.Fields(out)
		}
		return slurmcli.ChooseFaultNode(jobs[0], nodes, batchHost)
	}
	return slurmcli.FaultChoice{}, &exitError{Code: 1, Err: fmt.Errorf("no node of cluster %s could ask Slurm about job %s: %w", cluster, job, errors.Join(errs...))}
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
		return nil, &exitError{Code: 254, Err: err}
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
			return nil, &exitError{Code: 254, Err: err}
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
		return nil, &exitError{Code: 1, Err: fmt.Errorf("cluster %s has no controller or login node to ask Slurm from", cluster)}
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
