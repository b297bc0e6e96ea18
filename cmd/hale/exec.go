package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/cobra"
)

func newExecCommand() *cobra.Command {
	var cf clientFlags
	var cluster, node, dataDir string
	cmd := &cobra.Command{
		Use:   "exec --cluster-name NAME --node-id ID [-- COMMAND [ARG...]]",
		Short: "Run a command (default: a login shell) on a node (local provider: its namespaces; static: over SSH)",
		Long: `Run a command on a node, inside its network, UTS and mount namespaces: it sees the node's
hostname, address, /opt/ml, /fsx and the rest as the node's own processes do. --node-id takes an
instance id, a hostname (ip-a-b-c-d), a logical id (<group>-<n>) or, on an Eks cluster, the
Kubernetes Node's name (hyperpod-<instance id>). Without a command it starts a login shell. It works for
clusters of the local provider on the server's machine, as root. On a host of the static
provider it runs ssh as hale logs in there (the hosts file's key, port and user, and the
server's known_hosts file).`,
		Example: `  hale exec --cluster-name demo --node-id ip-10-222-0-10
  hale exec --cluster-name demo --node-id i-0123456789abcdef0 -- cat /opt/ml/config/resource_config.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := resolveNode(ctx, &cf, cluster, node)
			if err != nil {
				return err
			}
			argv, err := nodeCommand(dataDir, id, args)
			if err != nil {
				return err
			}
			path, err := exec.LookPath(argv[0])
			if err != nil {
				return err
			}
			return syscall.Exec(path, argv, os.Environ())
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&cluster, "cluster-name", "", "cluster name or ARN (required)")
	cmd.Flags().StringVar(&node, "node-id", "", "instance id or hostname of the node (required)")
	cmd.Flags().StringVar(&dataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "the server's data directory (env HALE_DATA_DIR)")
	cmd.MarkFlagRequired("cluster-name")
	cmd.MarkFlagRequired("node-id")
	return cmd
}

// resolveNode finds the node's instance id through the API, by instance id, hostname, logical
// id or Kubernetes Node name.
func resolveNode(ctx context.Context, cf *clientFlags, cluster, node string) (string, error) {
	c, err := cf.client(ctx)
	if err != nil {
		return "", &exitError{Code: 255, Err: err}
	}
	in := map[string]any{"ClusterName": cluster, "MaxResults": 100, "IncludeNodeLogicalIds": true}
	for {
		var page struct {
			ClusterNodeSummaries []struct{ InstanceId, PrivateDnsHostname, NodeLogicalId string }
			NextToken            string
		}
		if err := c.CallJSON(ctx, "ListClusterNodes", in, &page); err != nil {
			return "", &exitError{Code: 254, Err: err}
		}
		for _, s := range page.ClusterNodeSummaries {
			host, _, _ := strings.Cut(s.PrivateDnsHostname, ".")
			if s.InstanceId != "" && (s.InstanceId == node || host == node || s.PrivateDnsHostname == node || s.NodeLogicalId == node || eks.NodeName(s.InstanceId) == node) {
				return s.InstanceId, nil
			}
		}
		if page.NextToken == "" {
			return "", &exitError{Code: 254, Err: fmt.Errorf("cluster %s has no node %s", cluster, node)}
		}
		in["NextToken"] = page.NextToken
	}
}

// nodeCommand is the command line that runs args on the node: in its namespaces for a node of
// the local provider, over SSH for a host of the static one.
func nodeCommand(dataDir, id string, args []string) ([]string, error) {
	argv, err := local.ExecCommand(providerRoot(dataDir, string(local.Kind)), id, homeDir(), args)
	if errors.Is(err, provider.ErrNotFound) {
		if argv, serr := static.SSHCommand(providerRoot(dataDir, string(static.Kind)), id, args); serr == nil {
			return argv, nil
		}
		return nil, fmt.Errorf("node %s is neither a local-provider node nor a static-provider host of the server at %s (%v)", id, dataDir, err)
	}
	return argv, err
}

// homeDir is where a node command starts: the user's home directory when it exists, else /.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil && isDir(h) {
		return h
	}
	return "/"
}
