package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
)

func newObservabilityCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "observability",
		Short: "What monitoring systems need to watch a hale server (docs/observability.md)",
	}
	var cf clientFlags
	var token, job string
	var interval string
	pc := &cobra.Command{
		Use:   "prometheus-config",
		Short: "Print a Prometheus scrape config for this server's /metrics",
		Long: `Print the scrape_configs entry a Prometheus needs for the server the profile reaches
(--endpoint-url, or the [hale] profile of HALE_DATA_DIR): its /metrics on the API listener.
Give --metrics-token when the server was started with one; the config then carries it as
Prometheus' authorization credentials.`,
		Example: `  hale observability prometheus-config > /etc/prometheus/hale.yml
  hale observability prometheus-config --metrics-token "$TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{255, err}
			}
			u, err := url.Parse(c.Endpoint())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# hale server %s (docs/observability.md)\nscrape_configs:\n  - job_name: %s\n    scrape_interval: %s\n    scheme: %s\n    metrics_path: /metrics\n    static_configs:\n      - targets: [%q]\n",
				c.Endpoint(), job, interval, u.Scheme, u.Host)
			if token != "" {
				fmt.Fprintf(out, "    authorization:\n      credentials: %q\n", token)
			}
			return nil
		},
	}
	pc.Flags().StringVar(&token, "metrics-token", "", "the server's --metrics-token, if it has one")
	pc.Flags().StringVar(&job, "job-name", "hale", "the scrape job's name")
	pc.Flags().StringVar(&interval, "scrape-interval", "15s", "how often Prometheus scrapes")
	cf.add(pc)
	cmd.AddCommand(pc)
	return cmd
}
