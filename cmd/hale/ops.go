package main

import (
	"errors"
	"fmt"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/awscli"
	"github.com/spf13/cobra"
)

// addOperationCommands adds one command per API operation, named and parsed as `aws
// sagemaker` names and parses it (internal/awscli), and built from the model at run time:
// api.Operations gives the commands, api.Shapes their options, help, validation and skeletons.
func addOperationCommands(root *cobra.Command) {
	const group = "operations"
	root.AddGroup(&cobra.Group{ID: group, Title: "API operations (spelled as `aws sagemaker <operation>`; `hale <operation> help` for options):"})
	for _, op := range api.Operations {
		cmd := &cobra.Command{
			Use:     awscli.Name(op) + " [options]",
			Short:   awscli.Summary(op),
			GroupID: group,
			// The AWS CLI's syntax (multi-value list options, --no-x booleans, shorthand) does
			// not fit pflag: the command reads its own arguments against the model.
			DisableFlagParsing: true,
			Args:               cobra.ArbitraryArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				err := awscli.Run(cmd.Context(), op, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
				var e *awscli.Error
				if errors.As(err, &e) {
					return &exitError{Code: e.Code, Err: e}
				}
				return err
			},
		}
		cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
			fmt.Fprint(c.OutOrStdout(), awscli.Help(op))
		})
		root.AddCommand(cmd)
	}
}
