package main

import (
	"runtime/debug"

	"github.com/haleproject/hale/internal/exitcode"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmcli"
	"github.com/spf13/cobra"
)

// exitError is an error with hale's exit status (exitcode.Error).
type exitError = exitcode.Error

// exitCode is the status a command's error ends hale with: its own, else 1.
func exitCode(err error) int { return exitcode.Of(err) }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "hale",
		Short: "Self-hosted SageMaker HyperPod: cluster API server, node agent and CLI",
		Long: `hale runs GPU clusters the way SageMaker HyperPod does, on your own machines.

  hale server                      serve the SageMaker cluster API
  hale access-key create|list|delete
  hale console                     a one-time sign-in link of the web console
  hale <operation> [flags]         call an API operation, spelled as the AWS CLI spells it,
                                   e.g. hale create-cluster --cli-input-json file://cluster.json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.AddCommand(newServerCommand(), newKubeCommand(), newRepairsCommand(), newObservabilityCommand(), newUpdateKubeconfigCommand(), newHostsCommand(), newImageCommand(), newAccessKeyCommand(), newAgentCommand(), newNodeInitCommand(), newLogsCommand(), newExecCommand(), newUpCommand(), newDownCommand(),
		newDiagnoseCommand(), newDebugCommand(), newSrunCommand(), slurmcli.TopologyCommand(func() slurmcli.API { return &apiFlags{} }), newConsoleCommand())
	addOperationCommands(root)
	return root
}

// version is the module version and VCS revision the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v + " " + bi.GoVersion
}
