package agent

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/procfs"

	"github.com/haleproject/hale/internal/agentproto"
)

// Node metrics (docs/observability.md, "Node metrics"): every MetricsInterval the agent reads
// the node's counters inside the node and sends them as one NodeMetrics message; the server
// keeps the latest and exposes it on its /metrics, so Prometheus has one target for a whole
// fleet and needs no exporter on the nodes. The kernel's counters come from /proc (through
// prometheus/procfs, node-exporter's own reader) and statfs; the GPUs' from NVML where the
// driver is, the simulated devices otherwise.

// MetricsInterval is how often the agent samples the node: 15 s, the usual Prometheus scrape
// interval (a sample per scrape, and a small stream per node:
// about 1.2 KB every 15 s for an 8-GPU node). A new Xid is sent at once (xidSeen), so the last
// Xid reaches /metrics before a repair takes the node away.
const MetricsInterval = 15 * time.Second

// virtualNIC says whether an interface is a container's or a bridge's rather than the node's:
// their traffic is already counted on the node's own interfaces.
func virtualNIC(name string) bool {
	if name == "lo" {
		return true
	}
	for _, p := range []string{"veth", "docker", "br-", "cni", "flannel", "cali", "vxlan", "tunl", "virbr", "kube-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// sendMetrics samples the node every MetricsInterval for a session, the first at once.
func (a *Agent) sendMetrics(ctx context.Context) {
	t := time.NewTicker(MetricsInterval)
	defer t.Stop()
	for {
		a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Metrics{Metrics: a.sampleNode()}})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleNode reads the node's metrics now. What cannot be read is left at zero (and logged
// at debug level): a sample is never withheld for one missing file.
func (a *Agent) sampleNode() *agentproto.NodeMetrics {
	m := &agentproto.NodeMetrics{SampledUnixMs: time.Now().UnixMilli(), IntervalMs: uint32(MetricsInterval / time.Millisecond)}
	readKernel(m, procfs.DefaultMountPoint)
	m.Filesystems = a.filesystems()
	if len(m.Filesystems) > 0 && m.Filesystems[0].Mountpoint == "/" { // for a server before capability 12
		m.RootSizeBytes, m.RootAvailBytes = m.Filesystems[0].SizeBytes, m.Filesystems[0].AvailBytes
	}
	if a.nvml != nil {
		m.Gpus = a.nvml.sample(a)
	} else {
		m.Gpus = a.simulatedGPUMetrics(m.Load1)
	}
	if len(m.Gpus) > agentproto.MaxGPUs {
		m.Gpus = m.Gpus[:agentproto.MaxGPUs]
	}
	return m
}

// readKernel reads load, memory, CPU time and network counters from a proc file system.
func readKernel(m *agentproto.NodeMetrics, mount string) {
	fs, err := procfs.NewFS(mount)
	if err != nil {
		return
	}
	if l, err := fs.LoadAvg(); err == nil {
		m.Load1 = l.Load1
	}
	if mi, err := fs.Meminfo(); err == nil {
		if mi.MemTotalBytes != nil {
			m.MemoryTotalBytes = *mi.MemTotalBytes
		}
		if mi.MemAvailableBytes != nil {
			m.MemoryAvailableBytes = *mi.MemAvailableBytes
		}
	}
	if s, err := fs.Stat(); err == nil {
		c := s.CPUTotal
		for _, md := range []struct {
			mode string
			s    float64
		}{{"user", c.User}, {"nice", c.Nice}, {"system", c.System}, {"idle", c.Idle}, {"iowait", c.Iowait},
			{"irq", c.IRQ}, {"softirq", c.SoftIRQ}, {"steal", c.Steal}} {
			m.Cpu = append(m.Cpu, &agentproto.CPUMode{Mode: md.mode, Seconds: md.s})
		}
	}
	if nd, err := fs.NetDev(); err == nil {
		var names []string
		for name := range nd {
			if !virtualNIC(name) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names[:min(len(names), agentproto.MaxNetInterfaces)] {
			l := nd[name]
			m.Net = append(m.Net, &agentproto.NetInterface{Device: name, ReceiveBytes: l.RxBytes, TransmitBytes: l.TxBytes})
		}
	}
}

// simulatedGPUMetrics are the simulated GPUs' readings: plausible values that follow the
// node's work (utilisation from the load per CPU, since a training on hale's local nodes runs
// on CPUs), and the Xids injected into them. A GPU the fault injector took away is not seen, as
// DCGM does not see a GPU that fell off the bus.
func (a *Agent) simulatedGPUMetrics(load1 float64) []*agentproto.GPUMetrics {
	devs, err := a.simulatedDevices()
	if err != nil {
		return nil
	}
	util := math.Round(math.Min(100, 100*load1/float64(max(1, runtime.NumCPU()))))
	agg, now := a.eccAggregates(), time.Now()
	var out []*agentproto.GPUMetrics
	for _, d := range devs {
		if d.Kind != "gpu" || !onBus(d) {
			continue
		}
		c := a.gpuCount(int(d.Index))
		total := float64(d.MemoryMib)
		used := math.Min(total, math.Round(512+util/100*0.9*total)) // the driver's reserve, and the work
		// At most 70 C at full load, as a cooled data-centre GPU runs: a busy test machine's load
		// must not set off HyperPod's temperature alerts (80 C) on a healthy node.
		g := &agentproto.GPUMetrics{Index: d.Index, Uuid: d.Uuid, Model: d.Model, Device: fmt.Sprintf("nvidia%d", d.Index),
			GpuUtil: util, FbUsedMib: used, FbFreeMib: total - used, GpuTempC: 30 + 0.4*util, PowerUsageW: 60 + 2.4*util,
			EccDbeVolTotal: c.dbe, LastXid: c.lastXid, XidCount: c.xids, Simulated: true,
			NvlinkRecoveryErrors: c.nvlinkRecovery, NvlinkReplayErrors: c.nvlinkReplay}
		g.EccSbeAggTotal, g.EccDbeAggTotal = agg[d.Uuid].SBE, agg[d.Uuid].DBE
		throttle(g, int(d.Index), now)
		out = append(out, g)
	}
	return out
}

// sample reads the real GPUs through NVML.
func (m *nvmlMonitor) sample(a *Agent) []*agentproto.GPUMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*agentproto.GPUMetrics
	for _, d := range m.devs {
		g := &agentproto.GPUMetrics{Index: int32(d.index), Uuid: d.uuid, Model: d.name, Device: fmt.Sprintf("nvidia%d", d.index)}
		if u, ret := d.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.GpuUtil = float64(u.Gpu)
		}
		if mem, ret := d.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.FbUsedMib, g.FbFreeMib = float64(mem.Used>>20), float64(mem.Free>>20)
		}
		if t, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			g.GpuTempC = float64(t)
		}
		if p, ret := d.dev.GetPowerUsage(); ret == nvml.SUCCESS {
			g.PowerUsageW = float64(p) / 1000 // NVML reports milliwatts
		}
		g.EccSbeVolTotal, _ = d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		g.EccDbeVolTotal, _ = d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		g.EccSbeAggTotal, _ = d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)
		g.EccDbeAggTotal, _ = d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
		readViolations(d.dev, g)
		readNVLinkErrors(d.dev, g)
		c := a.gpuCount(d.index)
		g.LastXid, g.XidCount = c.lastXid, c.xids
		out = append(out, g)
	}
	return out
}
