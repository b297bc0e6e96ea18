// Package dashboards holds what monitoring systems load to watch hale: the Grafana dashboards
// (grafana/*.json) and HyperPod's preconfigured alerts as a Prometheus rule file
// (prometheus/hyperpod-alerts.yml). docs/observability.md says how to load each.
package dashboards

import _ "embed"

// HyperPodAlerts is prometheus/hyperpod-alerts.yml: HyperPod's preconfigured alert rules over
// hale's /metrics, which hale observability prometheus-rules prints.
//
//go:embed prometheus/hyperpod-alerts.yml
var HyperPodAlerts []byte
