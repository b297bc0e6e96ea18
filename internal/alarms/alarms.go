// Package alarms reads the alarms UpdateClusterSoftware's AutoRollbackConfiguration names.
//
// HyperPod names CloudWatch alarms there and rolls a software update back when one of them goes
// into ALARM while the update runs (the AWS API reference, DeploymentConfiguration:
// "Automatically rolls back the deployment when the specified alarms are triggered"). hale has
// no CloudWatch; it reads an AlarmName as the alertname of a Prometheus alerting rule, and the
// alarm is in ALARM while an alert of that name is firing (Prometheus's GET /api/v1/alerts).
// An alert that is only pending (its rule's for: has not passed) is not firing yet, as a
// CloudWatch alarm is not in ALARM before its evaluation periods.
package alarms

import (
	"context"
	"fmt"
	"slices"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Source tells which alarms are in ALARM now.
type Source interface {
	// Firing returns those of names that are in ALARM, in the order of names. An error means
	// the source could not be read: no alarm is known to be firing (CloudWatch's
	// INSUFFICIENT_DATA, which does not roll an update back either).
	Firing(ctx context.Context, names []string) ([]string, error)
	// String names the source in events ("Prometheus at http://...").
	String() string
}

// Prometheus is a Source over a Prometheus server's active alerts.
type Prometheus struct {
	url string
	api promv1.API
}

// NewPrometheus returns the Source of the Prometheus server at url (its base address, such as
// http://127.0.0.1:9090); an error when url is not one.
func NewPrometheus(url string) (*Prometheus, error) {
	c, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("alarms: Prometheus at %q: %w", url, err)
	}
	return &Prometheus{url: url, api: promv1.NewAPI(c)}, nil
}

// Firing implements Source: the names of which at least one alert is firing.
func (p *Prometheus) Firing(ctx context.Context, names []string) ([]string, error) {
	res, err := p.api.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the alerts of Prometheus at %s: %w", p.url, err)
	}
	firing := map[string]bool{}
	for _, a := range res.Alerts {
		if a.State == promv1.AlertStateFiring {
			firing[string(a.Labels[model.AlertNameLabel])] = true
		}
	}
	var out []string
	for _, n := range names {
		if firing[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// String implements Source.
func (p *Prometheus) String() string { return "Prometheus at " + p.url }
