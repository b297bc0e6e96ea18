package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/cobra"
)

// clientFlags are the AWS CLI's connection options, for hale's own commands.
type clientFlags struct {
	endpointURL, profile, region string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.endpointURL, "endpoint-url", "", "the hale server's endpoint (default: from the profile, or HALE_DATA_DIR's server)")
	cmd.Flags().StringVar(&f.profile, "profile", "", "AWS profile")
	cmd.Flags().StringVar(&f.region, "region", "", "region to sign with")
}

func (f *clientFlags) client(ctx context.Context) (*client.Client, error) {
	return client.New(ctx, client.Options{Profile: f.profile, Region: f.region, EndpointURL: f.endpointURL})
}

// apiFlags are clientFlags as slurmcli.API: the commands of internal packages reach the API
// through them.
type apiFlags struct{ clientFlags }

// AddFlags implements slurmcli.API.
func (f *apiFlags) AddFlags(cmd *cobra.Command) { f.add(cmd) }

// CallJSON implements slurmcli.API: no client to make is exit 255, as in the AWS CLI.
func (f *apiFlags) CallJSON(ctx context.Context, op string, in, out any) error {
	c, err := f.client(ctx)
	if err != nil {
		return &exitError{Code: 255, Err: err}
	}
	return c.CallJSON(ctx, op, in, out)
}

func newLogsCommand() *cobra.Command {
	var cf clientFlags
	var cluster, stream, prefix string
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs --cluster-name NAME [--log-stream-name STREAM] [--follow]",
		Short: "List a cluster's log streams, or print one (lifecycle scripts, cluster creation)",
		Long: `Without --log-stream-name, list the log streams of the cluster's log group
/aws/sagemaker/Clusters/<name>/<id>: LifecycleConfig/<group>/<instance-id> holds each node's
lifecycle script output, <name>-<timestamp> what every host's scripts did during a
CreateCluster (the first place to look when a creation fails), and
SagemakerHealthMonitoringAgent/<group>/<instance-id> each health finding about a node, one JSON
record each, as HyperPod's health monitoring agent writes them. With --log-stream-name, print
that stream; --follow keeps printing new lines.`,
		Example: `  hale logs --cluster-name demo
  hale logs --cluster-name demo --log-stream-name LifecycleConfig/workers/i-0123456789abcdef0 --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			c, err := cf.client(ctx)
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			q := url.Values{"cluster": {cluster}}
			if follow && stream == "" {
				return &exitError{Code: 252, Err: fmt.Errorf("--follow needs --log-stream-name (hale logs --cluster-name %s lists the streams)", cluster)}
			}
			if stream == "" {
				q.Set("prefix", prefix)
				var ans server.LogsAnswer
				if err := getJSON(ctx, c, q, &ans); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "LOG STREAM (group %s)\tLAST EVENT\n", ans.LogGroupName)
				for _, s := range ans.LogStreams {
					fmt.Fprintf(tw, "%s\t%s\n", s.LogStreamName, s.LastEventTimestamp.Format(time.RFC3339))
				}
				return tw.Flush()
			}
			q.Set("stream", stream)
			after := int64(0)
			for {
				q.Set("after", strconv.FormatInt(after, 10))
				var ans server.LogsAnswer
				if err := getJSON(ctx, c, q, &ans); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, e := range ans.Events {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e.Timestamp.Format("2006-01-02T15:04:05.000Z"), e.Message)
				}
				after = ans.NextSeq
				if len(ans.Events) > 0 {
					continue
				}
				if !follow {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(500 * time.Millisecond):
				}
			}
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&cluster, "cluster-name", "", "cluster name or ARN (required)")
	cmd.Flags().StringVar(&stream, "log-stream-name", "", "the stream to print")
	cmd.Flags().StringVar(&prefix, "log-stream-name-prefix", "", "list only streams starting with this")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.MarkFlagRequired("cluster-name")
	return cmd
}

func getJSON(ctx context.Context, c *client.Client, q url.Values, out any) error {
	body, err := c.Get(ctx, server.LogsPath, q)
	if err != nil {
		return &exitError{Code: 254, Err: err}
	}
	return json.Unmarshal(body, out)
}
