package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
	"github.com/spf13/cobra"
)

// The access-key commands work on the server's database directly (it is safe to open beside a
// running server: SQLite in WAL mode serializes the writers), so they need the data directory
// and the rights to read it, not an API key.

func newAccessKeyCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "access-key",
		Short: "Manage the access keys hale checks SigV4 signatures against",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "the server's data directory (env HALE_DATA_DIR)")
	var storeURL string
	cmd.PersistentFlags().StringVar(&storeURL, "store", envOr("HALE_STORE", ""), "the server's database, as hale server --store names it (env HALE_STORE; default DATA_DIR/hale.db)")
	open := func() (server.Backend, error) {
		if !server.IsPostgres(storeURL) {
			path := filepath.Join(dataDir, "hale.db")
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("no hale database at %s (start hale server with --data-dir %s first; for a server on PostgreSQL, pass its --store URL or set HALE_STORE): %w", path, dataDir, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return server.OpenStore(ctx, dataDir, storeURL)
	}

	var principal, credFile, confFile, profile string
	var actions, clusters []string
	var overwrite bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an access key for a principal, limited to some actions and cluster names",
		Long: `Create an access key for a principal, limited to some actions and cluster names.

With --credentials-file the key is also written there as an AWS profile (named by --profile,
the principal by default), and the profile's region and endpoint_url, copied from the server's
own [profile hale], go to --config-file (the config file beside the credentials file by
default), so the AWS CLI, the SDKs and the hale CLI can use the profile at once. An existing
profile of that name is never replaced without --overwrite.`,
		Example: `  hale access-key create --principal ci --actions 'sagemaker:Describe*,sagemaker:List*'
  hale access-key create --principal team-a --clusters 'team-a-*' --credentials-file ~/.aws/credentials`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if profile == "" {
				profile = principal
			}
			if credFile != "" && confFile == "" {
				confFile = filepath.Join(filepath.Dir(credFile), "config")
			}
			if credFile != "" && !overwrite {
				for _, f := range []string{credFile, confFile} {
					if has, err := auth.HasProfile(f, profile); err != nil {
						return err
					} else if has {
						return fmt.Errorf("%s already has a profile %q; choose another --profile or pass --overwrite", f, profile)
					}
				}
			}
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			k, err := auth.NewAccessKey(principal, actions, clusters)
			if err != nil {
				return err
			}
			if err := st.Write(context.Background(), func(tx store.Tx) error { return tx.InsertAccessKey(k) }); err != nil {
				return err
			}
			if credFile != "" {
				region, endpoint, err := auth.ReadConfigProfile(filepath.Join(dataDir, "config"), server.Profile)
				if err != nil {
					return fmt.Errorf("reading the server's profile to copy its endpoint: %w", err)
				}
				if err := auth.WriteCredentialsProfile(credFile, profile, k); err != nil {
					return err
				}
				if err := auth.WriteConfigProfile(confFile, profile, region, endpoint); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote profile [%s] to %s (key) and %s (region %s, endpoint_url %s)\n", profile, credFile, confFile, region, endpoint)
			}
			return printJSON(cmd, map[string]any{"AccessKey": map[string]any{
				"AccessKeyId": k.ID, "SecretAccessKey": k.Secret, "Principal": k.Principal,
				"Actions": k.Actions, "Clusters": orEmpty(k.Clusters), "CreateDate": k.CreatedAt,
			}})
		},
	}
	create.Flags().StringVar(&principal, "principal", "", "who holds the key (required)")
	create.Flags().StringSliceVar(&actions, "actions", nil, "allowed actions, IAM style (default sagemaker:*)")
	create.Flags().StringSliceVar(&clusters, "clusters", nil, "allowed cluster name patterns, e.g. team-a-* (default: every cluster)")
	create.Flags().StringVar(&credFile, "credentials-file", "", "also write the key as a profile to this AWS shared-credentials file")
	create.Flags().StringVar(&confFile, "config-file", "", "AWS config file for the profile's region and endpoint_url (default: config beside --credentials-file)")
	create.Flags().StringVar(&profile, "profile", "", "profile name for --credentials-file (default: the principal)")
	create.Flags().BoolVar(&overwrite, "overwrite", false, "replace an existing profile of that name")
	create.MarkFlagRequired("principal")

	list := &cobra.Command{
		Use:   "list",
		Short: "List access keys (secrets are never shown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			var keys []*store.AccessKey
			if err := st.Read(context.Background(), func(tx store.Tx) error {
				var err error
				keys, err = tx.ListAccessKeys()
				return err
			}); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCESS KEY ID\tPRINCIPAL\tACTIONS\tCLUSTERS\tCREATED")
			for _, k := range keys {
				cl := strings.Join(k.Clusters, ",")
				if cl == "" {
					cl = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Principal, strings.Join(k.Actions, ","), cl, k.CreatedAt.Format("2006-01-02T15:04:05Z"))
			}
			return tw.Flush()
		},
	}

	del := &cobra.Command{
		Use:   "delete ACCESS_KEY_ID",
		Short: "Delete an access key; requests signed with it fail from then on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.Write(context.Background(), func(tx store.Tx) error { return tx.DeleteAccessKey(args[0]) }); err != nil {
				return fmt.Errorf("delete %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "deleted %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "    ")
	return enc.Encode(v)
}
