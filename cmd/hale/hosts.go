package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/server"
)

func newHostsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Machines that already exist: the static provider's hosts file and pool",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a hosts file and say what it holds",
		Long: `Check a hosts file (JSON or YAML): every host needs an Address (an IP address or DNS name,
unique in the file whatever its Port), a KeyFile (an unencrypted SSH private key, relative to
the file's directory), and may give Port (22), User (root), InstanceType (one of SageMaker
HyperPod's ml. types) and Labels. Every fault is listed, naming its entry, and the exit status is 1.

  Hosts:
  - Address: 10.0.0.11
    KeyFile: keys/id_ed25519
    InstanceType: ml.p5.48xlarge
    Labels: {rack: r12}`,
		Example: `  hale hosts validate hosts.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := static.Load(args[0])
			if err != nil {
				return &exitError{Code: 1, Err: err}
			}
			byType := map[string]int{}
			for _, h := range inv.Hosts {
				byType[cmp.Or(h.InstanceType, "no instance type")]++
			}
			var parts []string
			for t, n := range byType {
				parts = append(parts, fmt.Sprintf("%s: %d", t, n))
			}
			sort.Strings(parts)
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d hosts (%s)\n", args[0], len(inv.Hosts), strings.Join(parts, ", "))
			return nil
		},
	})
	cmd.AddCommand(newHostsListCommand(), newHostsReturnCommand())
	return cmd
}

func newHostsListCommand() *cobra.Command {
	var cf clientFlags
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the static provider's hosts: state, instance type, cluster and node, and why",
		Long: `List every host of the pool of a server run with --provider static. State is Available (free
for an instance group of its type), InUse (a node runs on it), Quarantined (a node on it was
replaced for a fault; it stays out until 'hale hosts return') or Unreachable (hale could not
reach, set up or clean it over SSH). Reason says why.`,
		Example: `  hale hosts list
  hale hosts list --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			body, err := c.Get(cmd.Context(), server.HostsPath, nil)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if output == "json" {
				fmt.Fprintln(cmd.OutOrStdout(), string(body))
				return nil
			}
			var list server.HostList
			if err := json.Unmarshal(body, &list); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ADDRESS\tSTATE\tINSTANCE TYPE\tHOSTNAME\tCLUSTER\tNODE\tINSTANCE\tREASON")
			for _, h := range list.Hosts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Address, h.State, cmp.Or(h.InstanceType, "-"), cmp.Or(h.Hostname, "-"),
					cmp.Or(h.ClusterName, "-"), cmp.Or(h.LogicalID, "-"), cmp.Or(h.InstanceID, "-"), h.Reason)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&output, "output", "table", "table or json")
	cf.add(cmd)
	return cmd
}

func newHostsReturnCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "return ADDRESS",
		Short: "Put a Quarantined or Unreachable host back in the pool, after you fixed it",
		Long: `Put a host back in the static provider's pool. hale never does this by itself: a host is
Quarantined because a node on it was replaced for a fault (hale hosts list shows the finding),
and only a person who repaired or checked it knows it is good again.`,
		Example: `  hale hosts return 10.0.0.13`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			in, _ := json.Marshal(server.HostReturn{Address: args[0]})
			body, err := c.Post(cmd.Context(), server.HostsReturnPath, in)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var h static.HostStatus
			if err := json.Unmarshal(body, &h); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (%s)\n", h.Address, h.State, h.Reason)
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}
