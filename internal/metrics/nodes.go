package metrics

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Node metrics (docs/observability.md, "Node metrics"): each node's health from the store, and
// the latest sample its agent sent (agentproto.NodeMetrics, every agent.MetricsInterval),
// under node-exporter's and DCGM's names so their dashboards and alerts carry over. Every series
// has the node's labels: cluster, instance_group, instance_id and node (its name in its
// orchestrator, as sinfo and kubectl show it; its logical id before it has one).

// nodeLabels are the labels of every node series.
var nodeLabels = []string{"cluster", "instance_group", "instance_id", "node"}

// gpuLabels are dcgm-exporter's labels of a GPU series, after the node's.
var gpuLabels = append(append([]string{}, nodeLabels...), "gpu", "UUID", "device", "modelName")

func nodeDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string{}, nodeLabels...), extra...), nil)
}

func gpuDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, gpuLabels, nil)
}

var (
	healthDesc = nodeDesc("hale_node_health_status",
		"1 for each node, with its health as HyperPod's node-health-status label names it: Schedulable (Running, no repair), UnschedulablePendingReboot (a ResetGPU or Reboot repair open), UnschedulablePendingReplacement (a Replace repair open), Unschedulable (not in service: starting, stopping, or its repair held).", "status")
	ageDesc  = nodeDesc("hale_node_metrics_age_seconds", "Time since the node's agent sent the sample its node metrics show (it samples every 15 s; a sample older than 3 intervals is not shown).")
	loadDesc = nodeDesc("node_load1", "1-minute load average (/proc/loadavg), as node-exporter names it.")
	memTotal = nodeDesc("node_memory_MemTotal_bytes", "Memory total (/proc/meminfo MemTotal), bytes.")
	memAvail = nodeDesc("node_memory_MemAvailable_bytes", "Memory available (/proc/meminfo MemAvailable), bytes.")
	fsSize   = nodeDesc("node_filesystem_size_bytes", "Size of the node's root file system (statfs), bytes.", "mountpoint")
	fsAvail  = nodeDesc("node_filesystem_avail_bytes", "Space available to users on the node's root file system (statfs), bytes.", "mountpoint")
	cpuDesc  = nodeDesc("node_cpu_seconds_total", "Seconds all the node's CPUs spent in each mode (/proc/stat), summed over the CPUs: node-exporter's counter without its cpu label, to bound the series.", "mode")
	rxDesc   = nodeDesc("node_network_receive_bytes_total", "Bytes received on a network interface of the node (/proc/net/dev; loopback and container interfaces left out, at most 16).", "device")
	txDesc   = nodeDesc("node_network_transmit_bytes_total", "Bytes transmitted on a network interface of the node (/proc/net/dev; loopback and container interfaces left out, at most 16).", "device")
	gpuUtil  = gpuDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
	fbUsed   = gpuDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
	fbFree   = gpuDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
	gpuTemp  = gpuDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")
	gpuPower = gpuDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
	eccSBE   = gpuDesc("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.")
	eccDBE   = gpuDesc("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.")
	lastXid  = gpuDesc("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered (0: none since the node's agent started).")
	xidTotal = gpuDesc("hale_gpu_xid_errors_total", "Xid errors the node's agent saw on the GPU since it started (kernel log and NVML events).")
)

// nodeDescs are every node metric.
var nodeDescs = []*prometheus.Desc{healthDesc, ageDesc, loadDesc, memTotal, memAvail, fsSize, fsAvail, cpuDesc, rxDesc, txDesc,
	gpuUtil, fbUsed, fbFree, gpuTemp, gpuPower, eccSBE, eccDBE, lastXid, xidTotal}

// SeriesPerNode is how many series a node with this many network interfaces and GPUs adds: 15
// (health, sample age, load, 2 memory, 2 file system, 8 CPU modes), 2 per interface and 9 per
// GPU. An 8-GPU node with two interfaces has 15 + 4 + 72 = 91; no node has more than
// MaxSeriesPerNode.
func SeriesPerNode(interfaces, gpus int) int { return 15 + 2*interfaces + 9*gpus }

// MaxSeriesPerNode is the bound of a node's series, whatever its agent sends: 191 (the
// collector shows at most agentproto.MaxNetInterfaces interfaces, agentproto.MaxGPUs GPUs and
// the 8 agentproto.CPUModes).
var MaxSeriesPerNode = SeriesPerNode(agentproto.MaxNetInterfaces, agentproto.MaxGPUs)

// nodeCollector joins the agents' samples with the store's nodes at each scrape: one read
// transaction (the nodes and open repairs of each cluster), then the samples in memory.
type nodeCollector struct {
	st     store.Store
	agents Agents
	errors *atomic.Int64 // the store collector's: one error counter for all store reads
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range nodeDescs {
		ch <- d
	}
}

type nodeInfo struct {
	labels []string // nodeLabels' values
	status string
}

// nodeHealth is a node's health in HyperPod's node-health-status words.
func nodeHealth(n *store.Node, open *store.Repair) string {
	switch {
	case open != nil && open.State == store.RepairHeld:
		return "Unschedulable"
	case open != nil && open.Action == string(health.Replace):
		return "UnschedulablePendingReplacement"
	case open != nil:
		return "UnschedulablePendingReboot"
	case n.Status == "Running":
		return "Schedulable"
	}
	return "Unschedulable"
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byInstance := map[string]nodeInfo{}
	err := c.st.Read(ctx, func(tx store.Tx) error {
		clear(byInstance)
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
				byInstance[n.InstanceID] = nodeInfo{labels: []string{cl.Name, n.GroupName, n.InstanceID, name}, status: nodeHealth(n, repairOf[n.LogicalID])}
			}
		}
		return nil
	})
	if err != nil {
		c.errors.Add(1)
		return
	}
	for _, n := range byInstance {
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, 1, append(n.labels, n.status)...)
	}
	if c.agents == nil {
		return
	}
	now := time.Now()
	for _, s := range c.agents.NodeSamples() {
		n, ok := byInstance[s.InstanceID]
		if !ok { // a node the store no longer has (deleted since): nothing to name it by
			continue
		}
		collectSample(ch, n.labels, s, now)
	}
}

// collectSample sends one node's sample.
func collectSample(ch chan<- prometheus.Metric, l []string, s agentserver.NodeSample, now time.Time) {
	m := s.Metrics
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(l[:len(l):len(l)], extra...)...)
	}
	counter := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(l[:len(l):len(l)], extra...)...)
	}
	gauge(ageDesc, now.Sub(s.Received).Seconds())
	gauge(loadDesc, m.Load1)
	gauge(memTotal, float64(m.MemoryTotalBytes))
	gauge(memAvail, float64(m.MemoryAvailableBytes))
	gauge(fsSize, float64(m.RootSizeBytes), "/")
	gauge(fsAvail, float64(m.RootAvailBytes), "/")
	// The bounds hold whatever the agent sent (a newer or a broken one): known modes, and at
	// most the protocol's number of interfaces and GPUs, each once.
	modes := map[string]bool{}
	for _, c := range m.Cpu {
		if slices.Contains(agentproto.CPUModes, c.Mode) && !modes[c.Mode] {
			modes[c.Mode] = true
			counter(cpuDesc, c.Seconds, c.Mode)
		}
	}
	devs := map[string]bool{}
	for _, n := range m.Net {
		if len(devs) < agentproto.MaxNetInterfaces && !devs[n.Device] {
			devs[n.Device] = true
			counter(rxDesc, float64(n.ReceiveBytes), n.Device)
			counter(txDesc, float64(n.TransmitBytes), n.Device)
		}
	}
	gpus := map[int32]bool{}
	for _, g := range m.Gpus {
		if len(gpus) < agentproto.MaxGPUs && !gpus[g.Index] {
			gpus[g.Index] = true
			collectGPU(ch, l, g)
		}
	}
}

func collectGPU(ch chan<- prometheus.Metric, l []string, g *agentproto.GPUMetrics) {
	lv := append(l[:len(l):len(l)], strconv.Itoa(int(g.Index)), g.Uuid, g.Device, g.Model)
	for _, v := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{gpuUtil, prometheus.GaugeValue, g.GpuUtil}, {fbUsed, prometheus.GaugeValue, g.FbUsedMib}, {fbFree, prometheus.GaugeValue, g.FbFreeMib},
		{gpuTemp, prometheus.GaugeValue, g.GpuTempC}, {gpuPower, prometheus.GaugeValue, g.PowerUsageW},
		{eccSBE, prometheus.CounterValue, float64(g.EccSbeVolTotal)}, {eccDBE, prometheus.CounterValue, float64(g.EccDbeVolTotal)},
		{lastXid, prometheus.GaugeValue, float64(g.LastXid)}, {xidTotal, prometheus.CounterValue, float64(g.XidCount)},
	} {
		ch <- prometheus.MustNewConstMetric(v.d, v.t, v.v, lv...)
	}
}
