package main

import (
	"errors"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status, as the AWS CLI's (255 for a service error).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

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
		newDiagnoseCommand(), newDebugCommand(), newSrunCommand(), newTopologyCommand(), newConsoleCommand())
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
