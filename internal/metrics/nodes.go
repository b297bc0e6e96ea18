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
// Slurm controller or login node has; its logical id before it has either). A GPU's series also
// have dcgm-exporter's labels: gpu, UUID, device, modelName and Hostname (the node's host name,
// which NVIDIA's dashboards tell nodes apart by).

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
	labels   []*dto.LabelPair // nodeLabels'
	hostname string           // dcgm-exporter's Hostname label
	status   string           // "": an instance the store no longer has (replaced), shown for its last sample

	sample    *agentproto.NodeMetrics // nil: none (an older agent, none yet, or stale)
	full      bool                    // the agent sends every field (capability 12): see fromCapability12
	age       float64
	cpu       []*agentproto.CPUMode
	net       []*agentproto.NetInterface
	fs        []*agentproto.Filesystem
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
		return addGPUs(out, n, typ, v)
	}}
}

// fromCapability12 is a family that agents of capability 12 or later send: an older agent's
// sample has zeros there, which would read as "no errors" or "a full disk", so its node has no
// series of it.
func fromCapability12(f nodeFamily) nodeFamily {
	add := f.add
	f.add = func(out []*dto.Metric, n *nodeView) []*dto.Metric {
		if !n.full {
			return out
		}
		return add(out, n)
	}
	return f
}

// addGPUs appends a series of every GPU of the node with the value v gives.
func addGPUs(out []*dto.Metric, n *nodeView, typ dto.MetricType, v func(g *agentproto.GPUMetrics) float64) []*dto.Metric {
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
	fsFamily("node_filesystem_size_bytes", "Size of a file system of the node: its root and its own data disks (statfs), bytes.",
		func(f *agentproto.Filesystem) uint64 { return f.SizeBytes }),
	fsFamily("node_filesystem_avail_bytes", "Space available to users on a file system of the node (statfs), bytes.",
		func(f *agentproto.Filesystem) uint64 { return f.AvailBytes }),
	fromCapability12(fsFamily("node_filesystem_free_bytes", "Free space on a file system of the node, the root user's reserve included (statfs), bytes.",
		func(f *agentproto.Filesystem) uint64 { return f.FreeBytes })),
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
	gpuFamily("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors (since the driver loaded: a reboot or a GPU reset starts it again).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccSbeVolTotal) }),
	gpuFamily("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors (since the driver loaded: a reboot or a GPU reset starts it again).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccDbeVolTotal) }),
	fromCapability12(gpuFamily("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors (the GPU's lifetime count).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccSbeAggTotal) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors (the GPU's lifetime count).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.EccDbeAggTotal) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_POWER_VIOLATION", "Throttling duration due to power constraints (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.PowerViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_THERMAL_VIOLATION", "Throttling duration due to thermal constraints (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.ThermalViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "Throttling duration due to sync-boost constraints (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.SyncBoostViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "Throttling duration due to board limit constraints (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.BoardLimitViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_LOW_UTIL_VIOLATION", "Throttling duration due to low utilization (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.LowUtilViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_RELIABILITY_VIOLATION", "Throttling duration due to reliability constraints (in us).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.ReliabilityViolationUs) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "Total number of NVLink flow-control CRC errors (summed over the GPU's links).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.NvlinkCrcFlitErrors) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "Total number of NVLink data CRC errors (summed over the GPU's links).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.NvlinkCrcDataErrors) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "Total number of NVLink retries (summed over the GPU's links).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.NvlinkReplayErrors) })),
	fromCapability12(gpuFamily("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "Total number of NVLink recovery errors (summed over the GPU's links).", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.NvlinkRecoveryErrors) })),
	gpuFamily("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered (0: none since the node's agent started).", gaugeType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.LastXid) }),
	gpuFamily("hale_gpu_xid_errors_total", "Xid errors the node's agents saw on the GPU (kernel log and NVML events), continued across the node's agent restarts and reboots while the hale server runs.", counterType,
		func(g *agentproto.GPUMetrics) float64 { return float64(g.XidCount) }),
}

// SeriesPerNode is how many series a node whose agent is of capability 12 or later adds, with
// this many file systems, network interfaces and GPUs: 13 (health, sample age, load, 2 memory,
// 8 CPU modes), 3 per file system, 2 per interface and 21 per GPU (9 fields, 2 aggregate ECC
// counts, 6 violation times, 4 NVLink error counts). An 8-GPU node with two file systems and
// two interfaces has 13 + 6 + 4 + 168 = 191; no node has more than MaxSeriesPerNode.
func SeriesPerNode(filesystems, interfaces, gpus int) int {
	return 13 + 3*filesystems + 2*interfaces + 21*gpus
}

// MaxSeriesPerNode is the bound of a node's series, whatever its agent sends: 409 (/metrics
// shows at most agentproto.MaxFilesystems file systems, agentproto.MaxNetInterfaces
// interfaces, agentproto.MaxGPUs GPUs and the 8 agentproto.CPUModes); SeriesPerNode of those.
const MaxSeriesPerNode = 13 + 3*agentproto.MaxFilesystems + 2*agentproto.MaxNetInterfaces + 21*agentproto.MaxGPUs

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
	known map[string]knownNode
}

// knownNode is what a scrape showed of an instance: its labels and host name.
type knownNode struct {
	labels   []*dto.LabelPair
	hostname string
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
					pair(nodeLabels[2], n.InstanceID), pair(nodeLabels[3], name)}, hostname: hostName(n, name), status: nodeHealth(n, repairOf[n.LogicalID])})
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
		} else if k, ok := c.known[s.InstanceID]; ok {
			v := &nodeView{labels: k.labels, hostname: k.hostname}
			v.join(s, now)
			out = append(out, v)
		}
	}
	if len(out) > stored {
		slices.SortFunc(out, func(a, b *nodeView) int { return strings.Compare(a.labels[2].GetValue(), b.labels[2].GetValue()) })
	}
	if c.known == nil {
		c.known = map[string]knownNode{}
	}
	clear(c.known)
	for _, v := range out {
		c.known[v.labels[2].GetValue()] = knownNode{v.labels, v.hostname}
	}
	return out, nil
}

// join gives the view its sample, within the bounds whatever the agent sent (a newer or a
// broken one): the known CPU modes, at most the protocol's number of interfaces and GPUs, each
// once.
func (v *nodeView) join(s agentserver.NodeSample, now time.Time) {
	m := s.Metrics
	v.sample, v.age, v.full = m, now.Sub(s.Received).Seconds(), s.Capability >= 12
	modes := map[string]bool{}
	for _, c := range m.Cpu {
		if slices.Contains(agentproto.CPUModes, c.Mode) && !modes[c.Mode] {
			modes[c.Mode] = true
			v.cpu = append(v.cpu, c)
		}
	}
	mounts := map[string]bool{}
	for _, f := range m.Filesystems {
		if len(mounts) < agentproto.MaxFilesystems && f.Mountpoint != "" && !mounts[f.Mountpoint] {
			mounts[f.Mountpoint] = true
			v.fs = append(v.fs, f)
		}
	}
	if len(m.Filesystems) == 0 { // an agent before capability 12: the root's size and space
		v.fs = []*agentproto.Filesystem{{Mountpoint: "/", SizeBytes: m.RootSizeBytes, AvailBytes: m.RootAvailBytes}}
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
				pair("device", g.Device), pair("modelName", g.Model), pair("Hostname", v.hostname)))
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

// hostName is the node's host name, as dcgm-exporter's Hostname label has it (the exporter's
// os.Hostname on the node): the first label of its private DNS name, else its name in its
// orchestrator.
func hostName(n *store.Node, name string) string {
	if h, _, _ := strings.Cut(n.Details.PrivateDNSHostname, "."); h != "" {
		return h
	}
	return name
}

// fsFamily is a statfs field of every file system of the node, as node-exporter's gauge.
func fsFamily(name, help string, v func(f *agentproto.Filesystem) uint64) nodeFamily {
	return sampled(name, help, gaugeType, func(out []*dto.Metric, n *nodeView, _ *agentproto.NodeMetrics) []*dto.Metric {
		for _, f := range n.fs {
			out = gauge(out, fsLabels(n, f), float64(v(f)))
		}
		return out
	})
}

// fsLabels are the labels of a file system's series: node-exporter's mountpoint, device and
// fstype (an older agent's root has the mountpoint only), so rules that select or leave out
// file systems by those labels do as they would on node-exporter.
func fsLabels(n *nodeView, f *agentproto.Filesystem) []*dto.LabelPair {
	l := with(n.labels, pair("mountpoint", f.Mountpoint))
	if f.Device != "" {
		l = append(l, pair("device", f.Device))
	}
	if f.Fstype != "" {
		l = append(l, pair("fstype", f.Fstype))
	}
	return l
}
