package metrics

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Node metrics (docs/observability.md, "Node metrics"): each node's health from the store, and
// the latest sample its agent sent (agentproto.NodeMetrics, every agent.MetricsInterval; the
// last one of a session that ended is shown while fresh, agentserver.NodeSample.Ended), under
// node-exporter's and DCGM's names so their dashboards and alerts carry over. Every series
// has the node's labels: cluster, instance_group, instance_id and node (its name in its
// orchestrator, as sinfo and kubectl show it; else its host name, orchestrator.NodeName, as a
// Slurm controller or login node has; its logical id before it has either).

// nodeLabels are the labels of every node series.
var nodeLabels = []string{"cluster", "instance_group", "instance_id", "node"}

// nodeFamily is one node metric: its name, help and type, and the values of one node.
type nodeFamily struct {
	name, help string
	typ        dto.MetricType
	// add appends the node's series of this family.
	add func(out []*dto.Metric, n *nodeView) []*dto.Metric
}

// nodeView is one node at a scrape: its label pairs, health, and its sample within the bounds.
type nodeView struct {
	labels []*dto.LabelPair // nodeLabels'
	status string           // "": an instance the store no longer has (replaced), shown for its last sample

	sample    *agentproto.NodeMetrics // nil: none (an older agent, none yet, or stale)
	age       float64
	cpu       []*agentproto.CPUMode
	net       []*agentproto.NetInterface
	gpus      []*agentproto.GPUMetrics
	gpuLabels [][]*dto.LabelPair // nodeLabels' and dcgm-exporter's gpu, UUID, device, modelName
}

func pair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

// with is the node's label pairs and more (the node's are shared, never changed).
func with(base []*dto.LabelPair, more ...*dto.LabelPair) []*dto.LabelPair {
	return append(base[:len(base):len(base)], more...)
}

func gauge(out []*dto.Metric, l []*dto.LabelPair, v float64) []*dto.Metric {
	return append(out, &dto.Metric{Label: l, Gauge: &dto.Gauge{Value: &v}})
}

func counter(out []*dto.Metric, l []*dto.LabelPair, v float64) []*dto.Metric {
	return append(out, &dto.Metric{Label: l, Counter: &dto.Counter{Value: &v}})
}

// sampled is a family of the samples' values: nodes without a sample have none.
func sampled(name, help string, typ dto.MetricType, f func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric) nodeFamily {
	return nodeFamily{name: name, help: help, typ: typ, add: func(out []*dto.Metric, n *nodeView) []*dto.Metric {
		if n.sample == nil {
			return out
		}
		return f(out, n, n.sample)
	}}
}

// gpuFamily is a DCGM field of every GPU of the node.
func gpuFamily(name, help string, typ dto.MetricType, v func(g *agentproto.GPUMetrics) float64) nodeFamily {
	return nodeFamily{name: name, help: help, typ: typ, add: func(out []*dto.Metric, n *nodeView) []*dto.Metric {
		for i, g := range n.gpus {
			val := v(g)
			m := &dto.Metric{Label: n.gpuLabels[i]}
			if typ == dto.MetricType_COUNTER {
				m.Counter = &dto.Counter{Value: &val}
			} else {
				m.Gauge = &dto.Gauge{Value: &val}
			}
			out = append(out, m)
		}
		return out
	}}
}

const (
	gaugeType   = dto.MetricType_GAUGE
	counterType = dto.MetricType_COUNTER
)

// nodeFamilies are every node metric, in the order /metrics shows them.
var nodeFamilies = []nodeFamily{
	{name: "hale_node_health_status", typ: gaugeType,
		help: "1 for each node, with its health as HyperPod's node-health-status label names it: Schedulable (Running, no repair), UnschedulablePendingReboot (a ResetGPU or Reboot repair open), UnschedulablePendingReplacement (a Replace repair open), Unschedulable (not in service: starting, stopping, or its repair held).",
		add: func(out []*dto.Metric, n *nodeView) []*dto.Metric {
			if n.status == "" { // an instance the store no longer has: its last sample only
				return out
			}
			return gauge(out, with(n.labels, pair("status", n.status)), 1)
		}},
	sampled("hale_node_metrics_age_seconds", "Time since the node's agent sent the sample its node metrics show (it samples every 15 s; a sample older than 3 intervals is not shown).", gaugeType,
		func(out []*dto.Metric, n *nodeView, _ *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, n.labels, n.age)
		}),
	sampled("node_load1", "1-minute load average (/proc/loadavg), as node-exporter names it.", gaugeType,
		func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, n.labels, m.Load1)
		}),
	sampled("node_memory_MemTotal_bytes", "Memory total (/proc/meminfo MemTotal), bytes.", gaugeType,
		func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, n.labels, float64(m.MemoryTotalBytes))
		}),
	sampled("node_memory_MemAvailable_bytes", "Memory available (/proc/meminfo MemAvailable), bytes.", gaugeType,
		func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, n.labels, float64(m.MemoryAvailableBytes))
		}),
	sampled("node_filesystem_size_bytes", "Size of the node's root file system (statfs), bytes.", gaugeType,
		func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, with(n.labels, pair("mountpoint", "/")), float64(m.RootSizeBytes))
		}),
	sampled("node_filesystem_avail_bytes", "Space available to users on the node's root file system (statfs), bytes.", gaugeType,
		func(out []*dto.Metric, n *nodeView, m *agentproto.NodeMetrics) []*dto.Metric {
			return gauge(out, with(n.labels, pair("mountpoint", "/")), float64(m.RootAvailBytes))
		}),
	sampled("node_cpu_seconds_total", "Seconds all the node's CPUs spent in each mode (/proc/stat), summed over the CPUs: node-exporter's counter without its cpu label, to bound the series.", counterType,
		func(out []*dto.Metric, n *nodeView, _ *agentproto.NodeMetrics) []*dto.Metric {
			for _, c := range n.cpu {
				out = counter(out, with(n.labels, pair("mode", c.Mode)), c.Seconds)
			}
			return out
		}),
	sampled("node_network_receive_bytes_total", "Bytes received on a network interface of the node (/proc/net/dev; loopback and container interfaces left out, at most 16).", counterType,
		func(out []*dto.Metric, n *nodeView, _ *agentproto.NodeMetrics) []*dto.Metric {
			for _, i := range n.net {
				out = counter(out, with(n.labels, pair("device", i.Device)), float64(i.ReceiveBytes))
			}
			return out
		}),
	sampled("node_network_transmit_bytes_total", "Bytes transmitted on a network interface of the node (/proc/net/dev; loopback and container interfaces left out, at most 16).", counterType,
		func(out []*dto.Metric, n *nodeView, _ *agentproto.NodeMetrics) []*dto.Metric {
			for _, i := range n.net {
				out = counter(out, with(n.labels, pair("device", i.Device)), float64(i.TransmitBytes))
			}
			return out
		}),
	gpuFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", gaugeType, func(g *agentproto.GPUMetrics) float64 { return g.GpuUtil }),
	gpuFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gaugeType, func(g *agentproto.GPUMetrics) float64 { return g.FbUsedMib }),
	gpuFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gaugeType, func(g *agentproto.GPUMetrics) float64 { return g.FbFreeMib }),
	gpuFamily("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", gaugeType, func(g *agentproto.GPUMetrics) float64 { return g.GpuTempC }),
	gpuFamily("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", gaugeType, func(g *agentproto.GPUMetrics) float64 { return g.PowerUsageW }),
	gpuFamily("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors (continued across the node's reboots and GPU resets while the hale server runs).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccSbeVolTotal) }),
	gpuFamily("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors (continued across the node's reboots and GPU resets while the hale server runs).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccDbeVolTotal) }),
	gpuFamily("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered (0: none since the node's agent started).", gaugeType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.LastXid) }),
	gpuFamily("hale_gpu_xid_errors_total", "Xid errors the node's agents saw on the GPU (kernel log and NVML events), continued across the node's agent restarts and reboots while the hale server runs.", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.XidCount) }),
}

// SeriesPerNode is how many series a node with this many network interfaces and GPUs adds: 15
// (health, sample age, load, 2 memory, 2 file system, 8 CPU modes), 2 per interface and 9 per
// GPU. An 8-GPU node with two interfaces has 15 + 4 + 72 = 91; no node has more than
// MaxSeriesPerNode.
func SeriesPerNode(interfaces, gpus int) int { return 15 + 2*interfaces + 9*gpus }

// MaxSeriesPerNode is the bound of a node's series, whatever its agent sends: 191 (/metrics
// shows at most agentproto.MaxNetInterfaces interfaces, agentproto.MaxGPUs GPUs and the 8
// agentproto.CPUModes); SeriesPerNode of those.
const MaxSeriesPerNode = 15 + 2*agentproto.MaxNetInterfaces + 9*agentproto.MaxGPUs

// nodeMetrics joins the agents' samples with the store's nodes at each scrape: one read
// transaction (the nodes and open repairs of each cluster), then the samples in memory. It is no
// prometheus.Collector: with thousands of nodes, a scrape through the registry (a const metric
// made and sorted per series) took twice as long and allocated three times as much
// (docs/performance.md), so /metrics encodes these families itself, with client_model's types
// and expfmt's encoder, each family in one piece, nodes by instance id.
type nodeMetrics struct {
	st     store.Store
	agents Agents
	errors *atomic.Int64 // the store collector's: one error counter for all store reads

	mu sync.Mutex
	// known are the labels of each instance the last scrape showed, by instance id: a replaced
	// instance is gone from the store at once, and its samples until they are stale (the last
	// one holds the Xid the repair is for) are shown under the labels it had.
	known map[string][]*dto.LabelPair
}

// nodeHealth is a node's health in HyperPod's node-health-status words.
func nodeHealth(n *store.Node, open *store.Repair) string {
	switch {
	case open != nil && open.State == store.RepairHeld:
		return "Unschedulable"
	case open != nil && open.Action == store.RepairReplace:
		return "UnschedulablePendingReplacement"
	case open != nil:
		return "UnschedulablePendingReboot"
	case n.Status == "Running":
		return "Schedulable"
	}
	return "Unschedulable"
}

// views reads the nodes and joins their samples: every node the store has with an instance,
// by instance id. A sample of an instance the store no longer has is shown only when the last
// scrape named the instance (known): a replaced node's, whose session lasts until the old
// instance is retired and whose last sample is kept for a while after (agentserver.NodeSample.Ended).
func (c *nodeMetrics) views() ([]*nodeView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*nodeView
	err := c.st.Read(ctx, func(tx store.Tx) error {
		out = out[:0]
		cls, err := tx.ListClusters(store.ClusterQuery{Limit: 1 << 20})
		if err != nil {
			return err
		}
		for _, cl := range cls {
			nodes, err := tx.NodesOf(cl.ID)
			if err != nil {
				return err
			}
			open, err := tx.OpenRepairs(cl.ID)
			if err != nil {
				return err
			}
			repairOf := map[string]*store.Repair{}
			for _, rp := range open {
				repairOf[rp.LogicalID] = rp
			}
			for _, n := range nodes {
				if n.InstanceID == "" {
					continue
				}
				name := orchestrator.NodeName(n)
				if name == "" {
					name = n.LogicalID
				}
				out = append(out, &nodeView{labels: []*dto.LabelPair{pair(nodeLabels[0], cl.Name), pair(nodeLabels[1], n.GroupName),
					pair(nodeLabels[2], n.InstanceID), pair(nodeLabels[3], name)}, status: nodeHealth(n, repairOf[n.LogicalID])})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *nodeView) int { return strings.Compare(a.labels[2].GetValue(), b.labels[2].GetValue()) })
	if c.agents == nil {
		return out, nil
	}
	now := time.Now()
	stored := len(out)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.agents.NodeSamples() {
		i, ok := slices.BinarySearchFunc(out[:stored], s.InstanceID, func(v *nodeView, id string) int { return strings.Compare(v.labels[2].GetValue(), id) })
		if ok {
			out[i].join(s, now)
		} else if l := c.known[s.InstanceID]; l != nil {
			v := &nodeView{labels: l}
			v.join(s, now)
			out = append(out, v)
		}
	}
	if len(out) > stored {
		slices.SortFunc(out, func(a, b *nodeView) int { return strings.Compare(a.labels[2].GetValue(), b.labels[2].GetValue()) })
	}
	if c.known == nil {
		c.known = map[string][]*dto.LabelPair{}
	}
	clear(c.known)
	for _, v := range out {
		c.known[v.labels[2].GetValue()] = v.labels
	}
	return out, nil
}

// join gives the view its sample, within the bounds whatever the agent sent (a newer or a
// broken one): the known CPU modes, at most the protocol's number of interfaces and GPUs, each
// once.
func (v *nodeView) join(s agentserver.NodeSample, now time.Time) {
	m := s.Metrics
	v.sample, v.age = m, now.Sub(s.Received).Seconds()
	modes := map[string]bool{}
	for _, c := range m.Cpu {
		if slices.Contains(agentproto.CPUModes, c.Mode) && !modes[c.Mode] {
			modes[c.Mode] = true
			v.cpu = append(v.cpu, c)
		}
	}
	devs := map[string]bool{}
	for _, n := range m.Net {
		if len(devs) < agentproto.MaxNetInterfaces && !devs[n.Device] {
			devs[n.Device] = true
			v.net = append(v.net, n)
		}
	}
	gpus := map[int32]bool{}
	for _, g := range m.Gpus {
		if len(gpus) < agentproto.MaxGPUs && !gpus[g.Index] {
			gpus[g.Index] = true
			v.gpus = append(v.gpus, g)
			v.gpuLabels = append(v.gpuLabels, with(v.labels, pair("gpu", strconv.Itoa(int(g.Index))), pair("UUID", g.Uuid),
				pair("device", g.Device), pair("modelName", g.Model)))
		}
	}
}

// encode writes every node family that has series. A store that cannot be read is counted
// (hale_store_scrape_errors_total, shown from the next scrape), and the node metrics are
// left out of this one.
func (c *nodeMetrics) encode(enc expfmt.Encoder) error {
	views, err := c.views()
	if err != nil {
		c.errors.Add(1)
		return nil
	}
	var ms []*dto.Metric
	for _, f := range nodeFamilies {
		ms = ms[:0]
		for _, v := range views {
			ms = f.add(ms, v)
		}
		if len(ms) == 0 {
			continue
		}
		if err := enc.Encode(&dto.MetricFamily{Name: &f.name, Help: &f.help, Type: f.typ.Enum(), Metric: ms}); err != nil {
			return err
		}
	}
	return nil
}
