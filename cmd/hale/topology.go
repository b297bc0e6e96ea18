package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/haleproject/hale/internal/slurm"
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
	var topoFile, rcFile, clusterName, version, outDir, computeGroups string
	cmd := &cobra.Command{
		Use:   "generate --instance-topology FILE (--resource-config FILE | --cluster-name NAME)",
		Short: "Write topology.conf (or topology.yaml) from DescribeInstanceTopology output",
		Long: `Reads EC2 DescribeInstanceTopology output (the JSON of 'aws ec2 describe-instance-topology')
and the cluster's instances (a HyperPod resource_config.json, or ListClusterNodes of a hale
cluster), and writes the Slurm topology hale would for the cluster's compute nodes (the groups
of provisioning_parameters.json's worker_groups beside the resource config, the Compute groups
of the cluster's SlurmConfig, or --compute-groups): topology/tree for instance types with
hierarchical network nodes (a synthetic root over the top switches), topology/block for
UltraServer types (blocks by capacity block), nothing for types without topology. It validates
the result (every node placed once, Slurm-safe names, block sizes) and writes nothing when it
is not valid.

Slurm before 25.05 gets one cluster-wide topology.conf (before 23.11, which has no
topology/block, a tree); 25.05 and newer get topology.yaml. --slurm-version defaults to the
installed slurmctld's. Without --output-dir the file goes to stdout; the lines slurm.conf needs
(TopologyPlugin, or for topology.yaml the partitions' Topology=) go to stderr.`,
		Example: `  aws ec2 describe-instance-topology --region us-east-1 > topo.json
  hale topology generate --instance-topology topo.json --resource-config /opt/ml/config/resource_config.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(topoFile)
			if err != nil {
				return &exitError{2, fmt.Errorf("--instance-topology: %w", err)}
			}
			insts, err := topology.ParseInstanceTopology(f)
			f.Close()
			if err != nil {
				return &exitError{2, fmt.Errorf("--instance-topology %s: %w", topoFile, err)}
			}
			var cluster []topology.ClusterInstance
			var roles map[string]string // compute group -> partition; nil: every group
			switch {
			case rcFile != "" && clusterName == "":
				if cluster, roles, err = resourceConfigCluster(cmd, rcFile); err != nil {
					return err
				}
			case clusterName != "" && rcFile == "":
				if cluster, roles, err = apiCluster(cmd.Context(), &cf, clusterName); err != nil {
					return err
				}
			default:
				return &exitError{2, fmt.Errorf("topology generate: give exactly one of --resource-config and --cluster-name")}
			}
			if computeGroups != "" {
				roles = map[string]string{}
				for _, g := range strings.Split(computeGroups, ",") {
					roles[strings.TrimSpace(g)] = strings.TrimSpace(g)
				}
			}
			var compute []topology.ClusterInstance
			for _, c := range cluster {
				part, ok := roles[c.Group]
				if roles != nil && !ok {
					continue // the controller, login nodes: not Slurm compute nodes
				}
				if part == "" {
					part = c.Group
				}
				c.Partitions = []string{"dev", part}
				compute = append(compute, c)
			}
			if len(compute) == 0 {
				return &exitError{1, fmt.Errorf("topology generate: the cluster has no compute instance to place")}
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
				return &exitError{2, fmt.Errorf("--slurm-version: %w", err)}
			}
			nodes, missing, ignored := topology.NodesFrom(insts, compute)
			stderr := cmd.ErrOrStderr()
			if len(ignored) > 0 {
				fmt.Fprintf(stderr, "ignored %d instance(s) of the answer that are not compute instances of the cluster: %s\n", len(ignored), strings.Join(ignored, ","))
			}
			if len(missing) == len(compute) {
				return &exitError{1, fmt.Errorf("topology generate: none of the cluster's %d compute instance(s) is in %s (another region or account?)", len(compute), topoFile)}
			}
			if len(missing) > 0 {
				fmt.Fprintf(stderr, "%d instance(s) have no topology data yet (they go under %q): %s\n", len(missing), topology.Unplaced, strings.Join(missing, ","))
			}
			plan, err := topology.Generate(nodes, v)
			if err != nil {
				return &exitError{1, err}
			}
			name, body := "topology.conf", plan.Conf
			if plan.YAML != "" {
				name, body = "topology.yaml", plan.YAML
			}
			if body == "" {
				fmt.Fprintln(stderr, "no instance type of the cluster has topology: no topology file (TopologyPlugin stays the default)")
				return nil
			}
			fmt.Fprintf(stderr, "# for slurm.conf (Slurm %s):\n", v)
			if plan.Plugin != "" {
				fmt.Fprintf(stderr, "TopologyPlugin=%s\n", plan.Plugin)
			}
			parts := make([]string, 0, len(plan.Partitions))
			for p := range plan.Partitions {
				parts = append(parts, p)
			}
			sort.Strings(parts)
			for _, p := range parts {
				fmt.Fprintf(stderr, "PartitionName=%s ... Topology=%s\n", p, plan.Partitions[p])
			}
			if outDir == "" {
				fmt.Fprint(cmd.OutOrStdout(), body)
				return nil
			}
			if st, err := os.Stat(outDir); err != nil || !st.IsDir() {
				return &exitError{2, fmt.Errorf("--output-dir %s: not a directory", outDir)}
			}
			if name == "topology.yaml" {
				if _, err := os.Stat(filepath.Join(outDir, "topology.conf")); err == nil {
					fmt.Fprintf(stderr, "note: %s also holds a topology.conf, which Slurm ignores while topology.yaml exists\n", outDir)
				}
			}
			path := filepath.Join(outDir, name)
			if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
				return err
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "wrote %s\n", path)
			return nil
		},
	}
	cf.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&topoFile, "instance-topology", "", "DescribeInstanceTopology output (JSON) (required)")
	fl.StringVar(&rcFile, "resource-config", "", "a HyperPod resource_config.json: instance ids to node names")
	fl.StringVar(&clusterName, "cluster-name", "", "a hale cluster: instance ids to node names from ListClusterNodes")
	fl.StringVar(&computeGroups, "compute-groups", "", "the Slurm compute groups, comma-separated (default: from provisioning_parameters.json beside the resource config, or the cluster's SlurmConfig)")
	fl.StringVar(&version, "slurm-version", "", "the Slurm version to write for (default: slurmctld -V)")
	fl.StringVar(&outDir, "output-dir", "", "write topology.conf / topology.yaml there (atomically) instead of stdout")
	cmd.MarkFlagRequired("instance-topology")
	return cmd
}

// resourceConfigCluster reads a resource_config.json and, beside it, HyperPod's
// provisioning_parameters.json for which groups are Slurm compute groups.
func resourceConfigCluster(cmd *cobra.Command, path string) ([]topology.ClusterInstance, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, &exitError{2, fmt.Errorf("--resource-config: %w", err)}
	}
	defer f.Close()
	cluster, err := topology.ResourceConfigInstances(f)
	if err != nil {
		return nil, nil, &exitError{2, fmt.Errorf("--resource-config %s: %w", path, err)}
	}
	pp := filepath.Join(filepath.Dir(path), "provisioning_parameters.json")
	b, err := os.ReadFile(pp)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "no %s: every group is placed as a compute group (name them with --compute-groups)\n", pp)
		return cluster, nil, nil
	}
	roles, err := slurm.RolesFromProvisioningParameters(b)
	if err != nil {
		return nil, nil, &exitError{2, fmt.Errorf("%s: %w", pp, err)}
	}
	return cluster, roles.Workers, nil
}

// apiCluster reads a hale cluster's instances (ListClusterNodes) and its compute groups and
// partitions (DescribeCluster's SlurmConfig).
func apiCluster(ctx context.Context, cf *clientFlags, name string) ([]topology.ClusterInstance, map[string]string, error) {
	c, err := cf.client(ctx)
	if err != nil {
		return nil, nil, &exitError{255, err}
	}
	var desc struct {
		InstanceGroups []struct {
			InstanceGroupName string
			SlurmConfig       *struct {
				NodeType       string
				PartitionNames []string
			}
		}
	}
	if err := c.CallJSON(ctx, "DescribeCluster", map[string]any{"ClusterName": name}, &desc); err != nil {
		return nil, nil, &exitError{254, err}
	}
	var roles map[string]string
	for _, g := range desc.InstanceGroups {
		if g.SlurmConfig == nil {
			continue
		}
		if roles == nil {
			roles = map[string]string{}
		}
		if g.SlurmConfig.NodeType == "Compute" {
			part := g.InstanceGroupName
			if len(g.SlurmConfig.PartitionNames) > 0 {
				part = g.SlurmConfig.PartitionNames[0]
			}
			roles[g.InstanceGroupName] = part
		}
	}
	var out []topology.ClusterInstance
	in := map[string]any{"ClusterName": name, "MaxResults": 100}
	for {
		var page struct {
			ClusterNodeSummaries []struct{ InstanceId, PrivateDnsHostname, InstanceType, InstanceGroupName string }
			NextToken            string
		}
		if err := c.CallJSON(ctx, "ListClusterNodes", in, &page); err != nil {
			return nil, nil, &exitError{254, err}
		}
		for _, s := range page.ClusterNodeSummaries {
			host, _, _ := strings.Cut(s.PrivateDnsHostname, ".")
			out = append(out, topology.ClusterInstance{ID: s.InstanceId, Name: host, Type: s.InstanceType, Group: s.InstanceGroupName})
		}
		if page.NextToken == "" {
			return out, roles, nil
		}
		in["NextToken"] = page.NextToken
	}
}
