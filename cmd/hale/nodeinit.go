package main

import (
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/spf13/cobra"
)

func newNodeInitCommand() *cobra.Command {
	var setup string
	cmd := &cobra.Command{
		Use:   "node-init --local-setup FILE -- AGENT-COMMAND...",
		Short: "PID 1 of a local node (the local provider starts it)",
		Long: `Run as PID 1 of a local node's own PID namespace: apply the node's setup (hostname,
root file system, a /proc of the node), start the agent command as a child, and reap the
node's orphans. It stays when the agent exits, so the node's daemons and jobs outlive an
agent crash or upgrade.`,
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return local.NodeInit(setup, args)
		},
	}
	cmd.Flags().StringVar(&setup, "local-setup", "", "setup.json of the node to apply")
	cmd.MarkFlagRequired("local-setup")
	return cmd
}
