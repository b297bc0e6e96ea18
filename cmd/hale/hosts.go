package main

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/provider/static"
)

func newHostsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "The hosts file of machines that already exist (the static provider, in progress)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a hosts file and say what it holds",
		Long: `Check a hosts file (JSON or YAML): every host needs an Address (an IP address or DNS name,
unique with its Port), a KeyFile (an unencrypted SSH private key, relative to the file's
directory), and may give Port (22), User (root), InstanceType (one of SageMaker HyperPod's ml.
types) and Labels. Every fault is listed, naming its entry, and the exit status is 1.

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
				return &exitError{1, err}
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
	return cmd
}
