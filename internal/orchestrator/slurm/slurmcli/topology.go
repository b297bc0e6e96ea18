// Package slurmcli holds hale's command-line tools that speak Slurm: hale topology generate
// (Slurm's topology from EC2's instance topology) and how hale debug inject-fault --job reads a
// job from scontrol. cmd/hale adds the commands; Slurm's configuration code stays behind this
// package, inside the Slurm orchestrator.
package slurmcli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/topology"
	"github.com/spf13/cobra"
)

// TopologyCommand is hale topology (generate). newAPI makes the flags and the client through
// which --cluster-name reads a hale cluster, one for each command.
func TopologyCommand(newAPI func() API) *cobra.Command {
	cmd := &cobra.Command{Use: "topology", Short: "Slurm network topology from EC2 instance topology"}
	cmd.AddCommand(topologyGenerateCommand(newAPI()))
	return cmd
}

func topologyGenerateCommand(api API) *cobra.Command {
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
(TopologyPlugin, or for topology.yaml the partitions' Topology=) go to stderr.

When no compute instance's type has EC2 topology, it says so, writes nothing and exits 0: Slurm
stays flat. A file that is one page of a longer answer (it carries a NextToken) is refused when a
compute instance with topology is not in it: write every page, as 'aws ec2
describe-instance-topology' does without --no-paginate or --max-items.`,
		Example: `  aws ec2 describe-instance-topology --region us-east-1 > topo.json
  hale topology generate --instance-topology topo.json --resource-config /opt/ml/config/resource_config.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(topoFile)
			if err != nil {
				return &ExitError{Code: 2, Err: prefixOnce("--instance-topology", err)}
			}
			answer, err := topology.ReadAnswer(f)
			f.Close()
			if err != nil {
				return &ExitError{Code: 2, Err: prefixOnce("--instance-topology "+topoFile, err, filepath.Base(topoFile))}
			}
			var cluster []topology.ClusterInstance
			var roles map[string]string // compute group -> partition; nil: every group
			switch {
			case rcFile != "" && clusterName == "":
				if cluster, roles, err = resourceConfigCluster(cmd, rcFile); err != nil {
					return err
				}
			case clusterName != "" && rcFile == "":
				if cluster, roles, err = apiCluster(cmd.Context(), api, clusterName); err != nil {
					return err
				}
			default:
				return &ExitError{Code: 2, Err: fmt.Errorf("topology generate: give exactly one of --resource-config and --cluster-name")}
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
				c.Partitions = []string{slurm.DefaultPartition, part}
				compute = append(compute, c)
			}
			if len(compute) == 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("topology generate: the cluster has no compute instance to place")}
			}
			var v slurm.Version
			if version != "" {
				if v, err = slurm.ParseVersion(version); err != nil {
					return &ExitError{Code: 2, Err: prefixOnce("--slurm-version", err, "topology")}
				}
			}
			nodes, _, ignored := topology.NodesFrom(answer.Instances, compute)
			stderr := cmd.ErrOrStderr()
			if len(ignored) > 0 {
				fmt.Fprintf(stderr, "ignored %d instance(s) of the answer that are not compute instances of the cluster: %s\n", len(ignored), strings.Join(ignored, ","))
			}
			cov := coverageOf(answer, compute)
			if len(cov.withTopology) == 0 {
				// EC2 has no network nodes for these types (it leaves them out of its answer, or lists
				// them without NetworkNodes): there is nothing to place, and nothing is wrong.
				if len(cov.uncatalogued) > 0 {
					fmt.Fprintf(stderr, "note: EC2 lists network nodes for instance(s) of type(s) hale's catalog has no EC2 topology for, which stay flat: %s\n", strings.Join(cov.uncatalogued, "; "))
				}
				sayFlat(stderr, outDir)
				return nil
			}
			if answer.NextToken != "" {
				if len(cov.missing) > 0 {
					return &ExitError{Code: 1, Err: fmt.Errorf("--instance-topology %s is one page of a longer answer: it ends with \"NextToken\": %q, and %d of the cluster's %d compute instance(s) with EC2 topology are not in it (%s); they may be on the next pages.\n"+
						"Get every page into the file: run 'aws ec2 describe-instance-topology' without --no-paginate, --max-items or --next-token (the AWS CLI then fetches all pages itself), "+
						"or repeat the call with --next-token set to that NextToken (--starting-token if the page came from --max-items) until an answer has no NextToken, and concatenate the answers",
						topoFile, answer.NextToken, len(cov.missing), len(cov.withTopology), strings.Join(cov.missing, ","))}
				}
				fmt.Fprintf(stderr, "note: --instance-topology %s is one page of a longer answer (it ends with \"NextToken\": %q), but it holds every compute instance of the cluster with EC2 topology\n", topoFile, answer.NextToken)
			}
			if len(cov.missing) == len(cov.withTopology) {
				return &ExitError{Code: 1, Err: fmt.Errorf("topology generate: none of the cluster's %d compute instance(s) with EC2 topology (%s) is in %s (another region or account?)", len(cov.withTopology), strings.Join(cov.types, ", "), topoFile)}
			}
			if noData := slices.Sorted(slices.Values(append(slices.Clone(cov.missing), cov.noNetworkNodes...))); len(noData) > 0 {
				fmt.Fprintf(stderr, "%d instance(s) have no topology data yet (they go under %q): %s\n", len(noData), topology.Unplaced, strings.Join(noData, ","))
			}
			if version == "" {
				out, err := exec.Command("slurmctld", "-V").Output()
				if err != nil {
					return &ExitError{Code: 2, Err: fmt.Errorf("topology generate: no slurmctld here to ask its version; pass --slurm-version (e.g. 24.11)")}
				}
				if v, err = slurm.ParseVersion(string(out)); err != nil {
					return &ExitError{Code: 2, Err: prefixOnce("slurmctld -V", err, "topology")}
				}
			}
			if len(cov.noBlock) > 0 && (v.HasYAML() || (v.HasBlock() && topology.Choose(nodes) == topology.Block)) {
				fmt.Fprintf(stderr, "warning: %d UltraServer instance(s) have no capacity block yet (CapacityBlockId null, as EC2 answers right after launch): %s\n", len(cov.noBlock), strings.Join(cov.noBlock, ","))
				if v.HasYAML() {
					fmt.Fprintf(stderr, "  each gets a block of its own (solo-<node>) until EC2 reports it, so no job spans them over NVLink; run this again in a few minutes\n")
				} else {
					fmt.Fprintf(stderr, "  Slurm %s cannot hold a block smaller than BlockSizes (%d), so no topology is written; run this again once EC2 reports their CapacityBlockId\n", v, cov.blockSize)
				}
			}
			plan, err := slurm.Generate(nodes, v)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			name, body := "topology.conf", plan.Conf
			if plan.YAML != "" {
				name, body = "topology.yaml", plan.YAML
			}
			if body == "" {
				sayFlat(stderr, outDir)
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
				return &ExitError{Code: 2, Err: fmt.Errorf("--output-dir %s: not a directory", outDir)}
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
	api.AddFlags(cmd)
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
		return nil, nil, &ExitError{Code: 2, Err: prefixOnce("--resource-config", err)}
	}
	defer f.Close()
	cluster, err := topology.ResourceConfigInstances(f)
	if err != nil {
		return nil, nil, &ExitError{Code: 2, Err: prefixOnce("--resource-config "+path, err, filepath.Base(path))}
	}
	pp := filepath.Join(filepath.Dir(path), "provisioning_parameters.json")
	b, err := os.ReadFile(pp)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "no %s: every group is placed as a compute group (name them with --compute-groups)\n", pp)
		return cluster, nil, nil
	}
	roles, err := slurm.RolesFromProvisioningParameters(b)
	if err != nil {
		return nil, nil, &ExitError{Code: 2, Err: prefixOnce(pp, err, filepath.Base(pp))}
	}
	return cluster, roles.Workers, nil
}

// apiCluster reads a hale cluster's instances (ListClusterNodes) and its compute groups and
// partitions (DescribeCluster's SlurmConfig).
func apiCluster(ctx context.Context, api API, name string) ([]topology.ClusterInstance, map[string]string, error) {
	var desc struct {
		InstanceGroups []struct {
			InstanceGroupName string
			SlurmConfig       *struct {
				NodeType       string
				PartitionNames []string
			}
		}
	}
	if err := api.CallJSON(ctx, "DescribeCluster", map[string]any{"ClusterName": name}, &desc); err != nil {
		return nil, nil, apiError(err)
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
		if err := api.CallJSON(ctx, "ListClusterNodes", in, &page); err != nil {
			return nil, nil, apiError(err)
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

// flatMessage is what the command says when no compute instance's type has EC2 topology: it
// writes no file, and Slurm keeps its default (flat) topology.
const flatMessage = "no instance type of this cluster has EC2 topology: Slurm stays flat"

// sayFlat prints flatMessage, and names a topology file left in the output directory from
// before, which would keep Slurm from being flat.
func sayFlat(w io.Writer, outDir string) {
	fmt.Fprintln(w, flatMessage)
	if outDir == "" {
		return
	}
	for _, name := range []string{"topology.conf", "topology.yaml"} {
		if _, err := os.Stat(filepath.Join(outDir, name)); err == nil {
			fmt.Fprintf(w, "note: %s is left from before and nothing replaces it: remove it (and TopologyPlugin from slurm.conf) for Slurm to be flat\n", filepath.Join(outDir, name))
		}
	}
}

// coverage is what a DescribeInstanceTopology answer holds for the cluster's compute instances.
type coverage struct {
	withTopology []string // compute instances (ids) of types EC2 reports topology for
	types        []string // their types, sorted
	missing      []string // of withTopology, those the answer lacks
	// of withTopology, those the answer lists without network nodes (EC2 has none for them yet)
	noNetworkNodes []string
	noBlock        []string // UltraServer instances of the answer without a capacity block yet
	blockSize      int      // their UltraServer's block size
	uncatalogued   []string // "type (ids)": network nodes in the answer for types without topology in the catalog
}

// coverageOf sorts the compute instances by what the answer says of them. An instance's type is
// the cluster's, or the answer's where the cluster does not say.
func coverageOf(a *topology.Answer, compute []topology.ClusterInstance) coverage {
	byID := map[string]topology.InstanceTopology{}
	for _, in := range a.Instances {
		byID[in.InstanceID] = in
	}
	var cov coverage
	types := map[string]bool{}
	odd := map[string][]string{} // type -> ids
	for _, c := range compute {
		in, listed := byID[c.ID]
		typ := c.Type
		if typ == "" {
			typ = in.InstanceType
		}
		if !topology.HasTopology(typ) {
			if listed && hasNetworkNodes(in.NetworkNodes) {
				odd[typ] = append(odd[typ], c.ID)
			}
			continue
		}
		cov.withTopology = append(cov.withTopology, c.ID)
		types[typ] = true
		if !listed {
			cov.missing = append(cov.missing, c.ID)
			continue
		}
		if !hasNetworkNodes(in.NetworkNodes) {
			cov.noNetworkNodes = append(cov.noNetworkNodes, c.ID)
		}
		if us := topology.UltraServerOf(typ); us != nil && topology.NoCapacityBlock(in.CapacityBlockID) {
			cov.noBlock = append(cov.noBlock, c.ID)
			cov.blockSize = us.BlockSize
		}
	}
	cov.types = slices.Sorted(maps.Keys(types))
	for _, typ := range slices.Sorted(maps.Keys(odd)) {
		cov.uncatalogued = append(cov.uncatalogued, fmt.Sprintf("%s (%s)", typ, strings.Join(odd[typ], ",")))
	}
	sort.Strings(cov.missing)
	sort.Strings(cov.noBlock)
	return cov
}

// hasNetworkNodes says whether EC2 listed any network node (not empty, not "null").
func hasNetworkNodes(nn []string) bool {
	for _, s := range nn {
		if s = strings.TrimSpace(s); s != "" && s != "null" {
			return true
		}
	}
	return false
}

// prefixOnce puts what an error is about (a flag, a file) before its message, once: a message
// that already begins with the prefix, or with one of redundant (such as the file's base name,
// with which internal/slurm's errors begin, or the topology package's "topology"), loses that
// beginning first, so that no one reads "provisioning_parameters.json: provisioning_parameters.json: ...".
func prefixOnce(prefix string, err error, redundant ...string) error {
	return &prefixedError{prefix: prefix, redundant: redundant, err: err}
}

type prefixedError struct {
	prefix    string
	redundant []string
	err       error
}

func (e *prefixedError) Error() string {
	msg := e.err.Error()
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range append([]string{e.prefix}, e.redundant...) {
			if p != "" && strings.HasPrefix(msg, p+": ") {
				msg, trimmed = msg[len(p)+2:], true
			}
		}
	}
	return e.prefix + ": " + msg
}

func (e *prefixedError) Unwrap() error { return e.err }
