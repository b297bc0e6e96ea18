package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/deviceplugin"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/spf13/cobra"
)

func newAgentCommand() *cobra.Command {
	var cfg agent.Config
	var tokenFile, localSetup string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (providers start it on every node)",
		Long: `Run hale's node agent: it connects to the server over one gRPC stream (TLS, the server
verified against --ca-file), enrolls once with a one-time bootstrap token for a client
certificate it presents from then on (docs/security.md), reports inventory, heartbeats, and
runs the lifecycle scripts and commands the server sends. Providers start it on every node; you rarely run it by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if localSetup != "" {
				// Inside the local provider's fresh UTS and mount namespaces: become the node.
				setup, err := local.SetupNode(localSetup)
				if err != nil {
					return err
				}
				if setup.PrivateDev {
					cfg.DeviceDir = "/dev" // the node's own: simulated GPUs at NVIDIA's paths
				}
			}
			cfg.BootstrapTokenFile = tokenFile
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("instance_id", cfg.InstanceID)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return agent.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "the server's agent endpoint, host:port; servers on one store: each one's, comma-separated (the agent uses the one that leads)")
	f.StringVar(&cfg.InstanceID, "instance-id", "", "this node's instance id")
	f.StringVar(&cfg.InstanceType, "instance-type", "", "this node's ml.* instance type")
	f.StringVar(&cfg.StateDir, "state-dir", "/var/lib/hale-agent", "the agent's directory on the node")
	f.StringVar(&tokenFile, "bootstrap-token-file", "", "file holding the one-time bootstrap token")
	f.StringVar(&cfg.CAFile, "ca-file", "", "the server's agent CA certificate (PEM): the only CA the agent trusts")
	f.StringVar(&cfg.BootIDFile, "boot-id-file", agent.DefaultBootIDFile, "file holding the id of this boot (a reboot is told from an agent restart by it)")
	f.StringVar(&localSetup, "local-setup", "", "local provider: setup.json to apply (hostname, bind mounts) before starting")
	f.StringVar(&cfg.DeviceDir, "device-dir", "", "directory of the node's own device files (simulated GPUs at NVIDIA's paths); --local-setup sets it when the node's /dev is private")
	f.StringVar(&cfg.DevicePluginDir, "device-plugin-dir", "", "the kubelet's device plugin directory ("+deviceplugin.KubeletDir+"): the agent serves the node's GPUs as nvidia.com/gpu to a kubelet registering there; providers set it on Eks nodes whose kubelet hale runs (empty: never, so a machine's own kubelet and NVIDIA plugin are left alone)")
	f.StringArrayVar(&cfg.KernelLogs, "kernel-log", []string{"/dev/kmsg"}, "kernel log the health monitor follows (repeatable): /dev/kmsg, or a file such as /var/log/messages")
	f.StringArrayVar(&cfg.DiskPaths, "disk-path", []string{"/"}, "file system the health monitor watches for space (repeatable)")
	cmd.MarkFlagRequired("server")
	cmd.MarkFlagRequired("instance-id")
	cmd.MarkFlagRequired("ca-file")
	return cmd
}
