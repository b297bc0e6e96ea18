package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/haleproject/hale/internal/topology"
	"github.com/spf13/cobra"
)

func newTopologyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "topology", Short: "Slurm network topology from EC2 instance topology"}
	cmd.AddCommand(newTopologyGenerateCommand())
	return cmd
}

func newTopologyGenerateCommand() *cobra.Command {
	var cf clientFlags
	var topoFile, rcFile, cluster, version, outDir string
	cmd := &cobra.Command{
		Use:   "generate --instance-topology FILE (--resource-config FILE | --cluster-name NAME)",
		Short: "Write topology.conf (or topology.yaml) from DescribeInstanceTopology output",
		Long: `Reads EC2 DescribeInstanceTopology output (the JSON of 'aws ec2 describe-instance-topology')
and the cluster's instances (a HyperPod resource_config.json, or ListClusterNodes of a hale
cluster), and writes the Slurm topology hale would: topology/tree for instance types with
hierarchical network nodes (a synthetic root over the top switches), topology/block for
UltraServer types (blocks by capacity block), nothing for types without topology. It validates
the result (every node placed once, Slurm-safe names, block sizes) and writes nothing when it
is not valid.

Slurm before 25.05 gets one cluster-wide topology.conf (before 23.11, which has no
topology/block, a tree); 25.05 and newer get topology.yaml. --slurm-version defaults to the
installed slurmctld's. Without --output-dir the file goes to stdout; the TopologyPlugin line for
slurm.conf goes to stderr.`,
		Example: `  aws ec2 describe-instance-topology --region us-east-1 > topo.json
  hale topology generate --instance-topology topo.json --resource-config /opt/ml/config/resource_config.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(topoFile)
			if err != nil {
				return &exitError{2, err}
			}
			insts, err := topology.ParseInstanceTopology(f)
			f.Close()
			if err != nil {
				return &exitError{2, err}
			}
			var names, types map[string]string
			switch {
			case rcFile != "" && cluster == "":
				rf, err := os.Open(rcFile)
				if err != nil {
					return &exitError{2, err}
				}
				names, types, err = topology.ResourceConfigNames(rf)
				rf.Close()
				if err != nil {
					return &exitError{2, err}
				}
			case cluster != "" && rcFile == "":
				if names, types, err = clusterInstances(cmd.Context(), &cf, cluster); err != nil {
					return err
				}
			default:
				return &exitError{2, fmt.Errorf("topology generate: give exactly one of --resource-config and --cluster-name")}
			}
			if version == "" {
				out, err := exec.Command("slurmctld", "-V").Output()
				if err != nil {
					return &exitError{2, fmt.Errorf("topology generate: no slurmctld here to ask its version; pass --slurm-version (e.g. 24.11)")}
				}
				version = string(out)
			}
			v, err := topology.ParseVersion(version)
			if err != nil {
				return &exitError{2, err}
			}
			nodes, ignored := topology.NodesFrom(insts, names, types)
			if len(ignored) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "ignored %d instance(s) that are not the cluster's: %s\n", len(ignored), strings.Join(ignored, ","))
			}
			plan, err := topology.Generate(nodes, v)
			if err != nil {
				return &exitError{1, err}
			}
			if plan.Plugin == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "no instance type of the cluster has topology: no topology file (TopologyPlugin stays the default)")
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "slurm.conf: TopologyPlugin=%s (Slurm %s)\n", plan.Plugin, v)
			for p, t := range plan.Partitions {
				fmt.Fprintf(cmd.ErrOrStderr(), "slurm.conf: PartitionName=%s ... Topology=%s\n", p, t)
			}
			name, body := "topology.conf", plan.Conf
			if plan.YAML != "" {
				name, body = "topology.yaml", plan.YAML
			}
			if outDir == "" {
				fmt.Fprint(cmd.OutOrStdout(), body)
				return nil
			}
			path := filepath.Join(outDir, name)
			if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
				return err
			}
			return os.Rename(path+".tmp", path)
		},
	}
	cf.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&topoFile, "instance-topology", "", "DescribeInstanceTopology output (JSON) (required)")
	fl.StringVar(&rcFile, "resource-config", "", "a HyperPod resource_config.json: instance ids to node names")
	fl.StringVar(&cluster, "cluster-name", "", "a hale cluster: instance ids to node names from ListClusterNodes")
	fl.StringVar(&version, "slurm-version", "", "the Slurm version to write for (default: slurmctld -V)")
	fl.StringVar(&outDir, "output-dir", "", "write topology.conf / topology.yaml there (atomically) instead of stdout")
	cmd.MarkFlagRequired("instance-topology")
	return cmd
}

// clusterInstances maps a cluster's instance ids to Slurm node names and types.
func clusterInstances(ctx context.Context, cf *clientFlags, cluster string) (names, types map[string]string, err error) {
	c, err := cf.client(ctx)
	if err != nil {
		return nil, nil, &exitError{255, err}
	}
	names, types = map[string]string{}, map[string]string{}
	in := map[string]any{"ClusterName": cluster, "MaxResults": 100}
	for {
		var page struct {
			ClusterNodeSummaries []struct{ InstanceId, PrivateDnsHostname, InstanceType string }
			NextToken            string
		}
		if err := c.CallJSON(ctx, "ListClusterNodes", in, &page); err != nil {
			return nil, nil, &exitError{254, err}
		}
		for _, s := range page.ClusterNodeSummaries {
			host, _, _ := strings.Cut(s.PrivateDnsHostname, ".")
			names[s.InstanceId], types[s.InstanceId] = host, s.InstanceType
		}
		if page.NextToken == "" {
			return names, types, nil
		}
		in["NextToken"] = page.NextToken
	}
}
