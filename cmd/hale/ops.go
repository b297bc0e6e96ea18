package main

import "github.com/spf13/cobra"

// addOperationCommands adds one command per API operation. (Placeholder until the CLI lands.)
func addOperationCommands(root *cobra.Command) {}
