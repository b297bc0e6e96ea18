package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/cobra"
)

func newDownCommand() *cobra.Command {
	var cf clientFlags
	var cluster, dataDir string
	var purge bool
	cmd := &cobra.Command{
		Use:   "down [--cluster-name NAME] [--purge]",
		Short: "Delete a cluster (every cluster without --cluster-name) and wait until it is gone",
		Long: `Delete the named cluster, or every cluster of the server, through the API and wait until
each is gone. A 'hale up' that runs the cluster then stops its server and exits; the machine is
as it was, but for hale's data directory (its store, events and admin access key).

--purge also removes the data directory once its server has exited (it waits up to 30 s; a
'hale server' runs until stopped, so stop it first) and says what it removed. It refuses a
directory that holds no hale database. With no server running (a 'hale up' already ended),
--purge alone removes the directory, unless the stopped server left nodes running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := deleteClusters(cmd, &cf, cluster)
			if purge && err != nil && serverGone(err) {
				// Nothing to delete through the API, as after a hale up that already ended:
				// purge, unless the stopped server left nodes that only it can terminate.
				if n := local.Instances(providerRoot(dataDir, string(local.Kind))); n > 0 {
					return &exitError{Code: 1, Err: fmt.Errorf("no hale server answers for %s, and it left %s running; start it again (hale server --data-dir %s), then run hale down --purge",
						dataDir, plural.Count(n, "node", "nodes"), dataDir)}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "no hale server runs on %s, and it left no nodes\n", dataDir)
				err = nil
			}
			if err != nil {
				return err
			}
			if purge {
				if err := purgeDataDir(cmd.OutOrStdout(), dataDir, 30*time.Second); err != nil {
					return &exitError{Code: 1, Err: err}
				}
			}
			return nil
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&cluster, "cluster-name", "", "cluster name or ARN (default: every cluster)")
	cmd.Flags().BoolVar(&purge, "purge", false, "also remove the data directory (store, events, admin access key) once the server has exited")
	cmd.Flags().StringVar(&dataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "the server's data directory, for --purge (env HALE_DATA_DIR)")
	return cmd
}

// deleteClusters deletes the named cluster, or every cluster, and waits until each is gone.
func deleteClusters(cmd *cobra.Command, cf *clientFlags, cluster string) error {
	ctx := cmd.Context()
	c, err := cf.client(ctx)
	if err != nil {
		return &exitError{Code: 255, Err: err}
	}
	names := []string{cluster}
	if cluster == "" {
		names = nil
		var list struct {
			ClusterSummaries []struct{ ClusterName string }
		}
		if err := c.CallJSON(ctx, "ListClusters", map[string]any{"MaxResults": 100}, &list); err != nil {
			return &exitError{Code: 254, Err: err}
		}
		for _, s := range list.ClusterSummaries {
			names = append(names, s.ClusterName)
		}
	}
	for _, n := range names {
		if err := c.CallJSON(ctx, "DeleteCluster", map[string]any{"ClusterName": n}, nil); err != nil {
			return &exitError{Code: 254, Err: err}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "deleting %s ...", n)
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			err := c.CallJSON(ctx, "DescribeCluster", map[string]any{"ClusterName": n}, nil)
			if api.IsCode(err, api.CodeResourceNotFound) {
				break
			}
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if time.Now().After(deadline) {
				return &exitError{Code: 254, Err: fmt.Errorf("cluster %s still exists after 2 minutes", n)}
			}
		}
		fmt.Fprintln(cmd.OutOrStdout(), " gone")
	}
	return nil
}

// serverGone tells an error of a server that is not there (nothing listens at its endpoint, or
// its profile is gone) from one the server answered.
func serverGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "Unable to locate credentials")
}
