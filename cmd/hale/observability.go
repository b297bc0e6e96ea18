package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/dashboards"
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
--endpoint-url picks the target: give the server's --metrics-listen address
(http://HOST:PORT) for a Prometheus that scrapes that listener instead.
Give --metrics-token when the server was started with one; the config then carries it as
Prometheus' authorization credentials. The command asks the target's /metrics once (3 s at
most) and warns on stderr when it refuses the token given, or asks for one when none is;
a target it cannot reach is not checked, and the config is printed either way.`,
		Example: `  hale observability prometheus-config > /etc/prometheus/hale.yml
  hale observability prometheus-config --metrics-token "$TOKEN"
  hale observability prometheus-config --endpoint-url http://10.0.0.5:9464`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
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
			if w := checkMetricsToken(cmd.Context(), u, token); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return nil
		},
	}
	pc.Flags().StringVar(&token, "metrics-token", "", "the server's --metrics-token, if it has one")
	pc.Flags().StringVar(&job, "job-name", "hale", "the scrape job's name")
	pc.Flags().StringVar(&interval, "scrape-interval", "15s", "how often Prometheus scrapes")
	cf.add(pc)
	cmd.AddCommand(pc)
	cmd.AddCommand(&cobra.Command{
		Use:   "prometheus-rules",
		Short: "Print HyperPod's preconfigured alerts as a Prometheus rule file over hale's metrics",
		Long: `Print HyperPod's preconfigured alert rules (the observability add-on's group
sagemaker_hyperpod_alerts: GPU temperature, ECC, power and thermal violations, NVLink errors,
Xid errors, node disk space) as a Prometheus rule file over hale's /metrics. Load it with
rule_files in prometheus.yml next to the scrape config prometheus-config prints. The file says
which two of HyperPod's ten it leaves out and why (docs/observability.md, "HyperPod's alerts").`,
		Example: `  hale observability prometheus-rules > /etc/prometheus/hale-alerts.yml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := cmd.OutOrStdout().Write(dashboards.HyperPodAlerts)
			return err
		},
	})
	return cmd
}

// checkMetricsToken asks the target's /metrics once, with token as its bearer token (none when
// ""), and returns a warning when the server refuses it (401), "" otherwise: a server that
// cannot be reached within 3 s, or answers anything else, is not a reason to withhold the
// config (Prometheus may reach what this machine cannot).
func checkMetricsToken(ctx context.Context, endpoint *url.URL, token string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	target := url.URL{Scheme: endpoint.Scheme, Host: endpoint.Host, Path: "/metrics"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return ""
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusUnauthorized:
		return ""
	case token == "":
		return fmt.Sprintf("%s answers 401: the server has a --metrics-token; give it with --metrics-token", target.String())
	}
	return fmt.Sprintf("%s refuses this --metrics-token (401): it is not the server's --metrics-token", target.String())
}
