// Package metrics is the server's Prometheus metrics (docs/observability.md), with
// prometheus/client_golang: what the API serves, what the store holds (clusters, groups, nodes
// and repairs by status, read at each scrape so a restarted server loses nothing), the health
// findings agents report, and the agents' sessions. Names, labels and units follow Prometheus'
// conventions: a hale_ prefix, _total counters, _seconds durations, bounded label values.
package metrics

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/subtle"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/store"
)

// Agents is what the metrics read of the agent server.
type Agents interface {
	Stats() agentserver.SessionStats
	// NodeSamples are the connected agents' fresh node metrics samples.
	NodeSamples() []agentserver.NodeSample
}

// Server holds the server's metrics in a registry of its own.
type Server struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	findings *prometheus.CounterVec
	drained  *prometheus.HistogramVec
	ended    *prometheus.HistogramVec
	resumed  *prometheus.HistogramVec
	leading  prometheus.Gauge
	tenures  prometheus.Counter
	nodes    *nodeMetrics
}

// New registers the server's metrics; st and agents are read at each scrape (agents may be
// nil: a server without agents).
func New(st store.Store, agents Agents) *Server {
	m := &Server{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hale_api_requests_total",
		Help: "SageMaker API requests served, by operation and error code (\"\" for success; the SageMaker error type otherwise).",
	}, []string{"operation", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hale_api_request_duration_seconds",
		Help:    "Time to answer a SageMaker API request, by operation.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"operation"})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hale_health_findings_total",
		Help: "Health findings agents reported, by fault type (the catalog's, e.g. gpu.bus_lost) and the action it asks (Ignore, ResetGPU, Reboot, Replace).",
	}, []string{"fault", "action"})
	// Repairs take from seconds (a drain) to minutes (a replacement on a real machine).
	repairBuckets := []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800}
	m.drained = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hale_repair_fault_to_drained_seconds",
		Help:    "Time from a repair's finding (or request) to its node drained in its orchestrator, by action.",
		Buckets: repairBuckets,
	}, []string{"action"})
	m.ended = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hale_repair_fault_to_end_seconds",
		Help:    "Time from a repair's finding (or request) to its end, by action and outcome: Done is the node back in service; Failed, Cancelled, Quarantined the others.",
		Buckets: repairBuckets,
	}, []string{"action", "outcome"})
	m.resumed = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hale_repair_fault_to_job_resumed_seconds",
		Help:    "Time from a repair's finding to the job it interrupted running again (srun --auto-resume=1: the step retried, or the requeued job started again), by action.",
		Buckets: repairBuckets,
	}, []string{"action"})
	m.leading = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hale_leader",
		Help: "1 while this server runs the reconcilers (it holds their lease in the store), 0 while it stands by (internal/leader).",
	})
	m.tenures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hale_leader_tenures_total",
		Help: "Times this server began to run the reconcilers (took their lease).",
	})
	sc := &storeCollector{st: st}
	// A nil *agentserver.Server in an Agents is not nil: the collectors test for both.
	if a, ok := agents.(*agentserver.Server); ok && a == nil {
		agents = nil
	}
	m.nodes = &nodeMetrics{st: st, agents: agents, errors: &sc.errors}
	m.reg.MustRegister(m.requests, m.duration, m.findings, m.drained, m.ended, m.resumed, m.leading, m.tenures,
		sc, &agentCollector{agents: agents},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry of the server's own metrics (tests gather from it); the node
// metrics are not in it (nodes.go): /metrics adds them.
func (m *Server) Registry() *prometheus.Registry { return m.reg }

// ObserveRequest counts one API request. operation must be one of the API's (the caller
// maps anything else to "unknown", so clients cannot grow the label set).
func (m *Server) ObserveRequest(operation, code string, d time.Duration) {
	m.requests.WithLabelValues(operation, code).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}

// Leading records whether this server runs the reconcilers (hale_leader); a start counts a
// tenure.
func (m *Server) Leading(leading bool) {
	if leading {
		m.leading.Set(1)
		m.tenures.Inc()
		return
	}
	m.leading.Set(0)
}

// ObserveFinding counts one health finding.
func (m *Server) ObserveFinding(fault, action string) {
	m.findings.WithLabelValues(fault, action).Inc()
}

// RepairDrained observes a repair's drain (controller.Observer).
func (m *Server) RepairDrained(action string, sinceFault time.Duration) {
	m.drained.WithLabelValues(action).Observe(sinceFault.Seconds())
}

// RepairEnded observes a repair's end (controller.Observer).
func (m *Server) RepairEnded(action, outcome string, sinceFault time.Duration) {
	m.ended.WithLabelValues(action, outcome).Observe(sinceFault.Seconds())
}

// JobResumed observes a job that a repair's fault interrupted running again (controller.Observer).
func (m *Server) JobResumed(action string, sinceFault time.Duration) {
	m.resumed.WithLabelValues(action).Observe(sinceFault.Seconds())
}

// Handler serves the metrics in Prometheus' text format (gzip-compressed when the scraper
// accepts it, as Prometheus does): the registry's, then the node metrics. With a token, a
// request must carry "Authorization: Bearer <token>" (Prometheus' bearer_token / authorization
// setting); it is never SigV4, which Prometheus cannot sign.
func (m *Server) Handler(token string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hale metrics"`)
			http.Error(w, "hale metrics need Authorization: Bearer <the server's --metrics-token>", http.StatusUnauthorized)
			return
		}
		m.serve(w, r)
	})
}

// serve writes one scrape. A collector's error leaves its metrics out and the rest is served
// (promhttp's ContinueOnError); a scrape that gathers nothing at all is an error.
func (m *Server) serve(w http.ResponseWriter, r *http.Request) {
	mfs, err := m.reg.Gather()
	if err != nil && len(mfs) == 0 {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if gzipAccepted(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Encoding", "gzip")
		// The fastest level: the text shrinks about 30 times at it, and a scrape of thousands
		// of nodes is mostly this compression otherwise.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush() // before gz.Close (deferred calls run last first)
	enc := expfmt.NewEncoder(bw, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away
		}
	}
	m.nodes.encode(enc)
}

// gzipAccepted reports whether an Accept-Encoding header accepts gzip (not refused with q=0).
func gzipAccepted(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(params, " ", "") != "q=0"
		}
	}
	return false
}

var (
	clustersDesc = prometheus.NewDesc("hale_clusters", "Clusters by status (SageMaker's ClusterStatus).", []string{"status"}, nil)
	groupsDesc   = prometheus.NewDesc("hale_instance_groups", "Instance groups by cluster and status (SageMaker's InstanceGroupStatus).", []string{"cluster", "status"}, nil)
	nodesDesc    = prometheus.NewDesc("hale_nodes", "Nodes by cluster, instance group and status (SageMaker's ClusterInstanceStatus).", []string{"cluster", "instance_group", "status"}, nil)
	repairsDesc  = prometheus.NewDesc("hale_repairs", "Repairs the store keeps, by cluster, action (ResetGPU, Reboot, Replace) and state (Done, Failed, Cancelled, Quarantined, or one under way).", []string{"cluster", "action", "state"}, nil)
	scrapeErr    = prometheus.NewDesc("hale_store_scrape_errors_total", "Scrapes whose read of the store failed (the store metrics are then missing).", nil, nil)
)

// storeCollector reads the store at each scrape: one transaction, a few grouped counts per
// cluster, so a scrape's cost grows with clusters, not nodes.
type storeCollector struct {
	st     store.Store
	errors atomic.Int64 // scrapes may run at once
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{clustersDesc, groupsDesc, nodesDesc, repairsDesc, scrapeErr} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []prometheus.Metric
	err := c.st.Read(ctx, func(tx store.Tx) error {
		out = out[:0]
		cls, err := tx.ListClusters(store.ClusterQuery{Limit: 1 << 20})
		if err != nil {
			return err
		}
		byStatus := map[string]float64{}
		for _, cl := range cls {
			byStatus[string(cl.Status)]++
			groups, err := tx.Groups(cl.ID)
			if err != nil {
				return err
			}
			gs := map[string]float64{}
			for _, g := range groups {
				gs[string(g.State.Status)]++
			}
			for s, n := range gs {
				out = append(out, prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, n, cl.Name, s))
			}
			counts, err := tx.NodeCounts(cl.ID)
			if err != nil {
				return err
			}
			for g, byS := range counts {
				for s, n := range byS {
					out = append(out, prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), cl.Name, g, string(s)))
				}
			}
			repairs, err := tx.RepairCounts(cl.ID)
			if err != nil {
				return err
			}
			for k, n := range repairs {
				out = append(out, prometheus.MustNewConstMetric(repairsDesc, prometheus.GaugeValue, float64(n), cl.Name, k.Action, string(k.State)))
			}
		}
		for s, n := range byStatus {
			out = append(out, prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, n, s))
		}
		return nil
	})
	if err != nil {
		c.errors.Add(1)
	} else {
		for _, m := range out {
			ch <- m
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErr, prometheus.CounterValue, float64(c.errors.Load()))
}

var (
	agentsDesc  = prometheus.NewDesc("hale_agents_connected", "Agents with a session now, by the agent protocol capability version they announced.", []string{"version"}, nil)
	silenceDesc = prometheus.NewDesc("hale_agent_heartbeat_lag_max_seconds", "The longest time since a connected agent last spoke (a heartbeat is due every --heartbeat-interval).", nil, nil)
)

type agentCollector struct{ agents Agents }

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) { ch <- agentsDesc; ch <- silenceDesc }

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	if c.agents == nil {
		return
	}
	st := c.agents.Stats()
	for v, n := range st.ByVersion {
		ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(n), strconv.FormatUint(uint64(v), 10))
	}
	ch <- prometheus.MustNewConstMetric(silenceDesc, prometheus.GaugeValue, st.MaxSilence.Seconds())
}
