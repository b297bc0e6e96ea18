package main

import (
	"encoding/json"
	"fmt"

	"github.com/haleproject/hale/internal/console"
	"github.com/spf13/cobra"
)

func newConsoleCommand() *cobra.Command {
	var cf clientFlags
	var quiet bool
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Print a one-time sign-in URL of the web console",
		Long: `Print a one-time sign-in URL of the hale server's web console (/console), for the access key
this command signs with (the "hale" profile's admin key by default), as Jupyter prints its
token URL. The link signs one browser in, once, within ten minutes; the session then lasts
12 hours. Other keys sign in with their id and secret on the console's sign-in page, or with
their own link (--profile). docs/console.md describes the console.`,
		Example: `  hale console
  hale console --profile team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			body, err := c.Post(cmd.Context(), console.TokenPath, []byte("{}"))
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var ans console.TokenAnswer
			if err := json.Unmarshal(body, &ans); err != nil {
				return fmt.Errorf("the server's answer: %w", err)
			}
			if quiet {
				fmt.Fprintln(cmd.OutOrStdout(), ans.URL)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Open the hale console (this link signs in once, until %s):\n  %s\n",
				ans.ExpiresAt.Local().Format("15:04:05"), ans.URL)
			return nil
		},
	}
	cf.add(cmd)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the URL")
	return cmd
}
