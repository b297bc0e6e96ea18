package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/haleproject/hale/internal/agentproto"
)

// What the agent counts of each GPU beyond NVML's readings, and the simulated GPUs' driver
// state: DCGM's volatile counts start again when the driver does (a reboot, which starts the
// agent again, or a GPU reset), its aggregate ones are the GPU's lifetime (InfoROM) counts.

// gpuCounters are what the agent counts of each GPU itself: the Xids its monitors reported
// since it started (NVML has no Xid counter: DCGM counts them from the same events), and, for
// a simulated GPU, the ECC and NVLink errors the injected Xids stand for.
type gpuCounters struct {
	mu    sync.Mutex
	byGPU map[int]*gpuCount
}

type gpuCount struct {
	xids           uint64
	lastXid        int32
	dbe            uint64 // volatile double-bit ECC errors (a simulated GPU's, from Xid 48)
	nvlinkRecovery uint64 // a simulated GPU's NVLink recovery errors (Xid 74)
	nvlinkReplay   uint64
}

// xidSeen counts an Xid of GPU gpu (an index; -1 when the finding names none) and sends a
// sample at once. On a simulated GPU, a double-bit ECC error (Xid 48) counts in its volatile
// and lifetime ECC counts, and an NVLink error (Xid 74) in its NVLink error counters, as the
// real driver's counters move with those Xids.
func (a *Agent) xidSeen(gpu int, xid int32) {
	if gpu < 0 || xid <= 0 {
		return
	}
	a.gpuCounts.mu.Lock()
	if a.gpuCounts.byGPU == nil {
		a.gpuCounts.byGPU = map[int]*gpuCount{}
	}
	c := a.gpuCounts.byGPU[gpu]
	if c == nil {
		c = &gpuCount{}
		a.gpuCounts.byGPU[gpu] = c
	}
	c.xids++
	c.lastXid = xid
	switch xid {
	case 48: // NVIDIA's Xid 48: a double-bit ECC error
		c.dbe++
	case 74: // an NVLink error: the link went through recovery, its data was replayed
		c.nvlinkRecovery++
		c.nvlinkReplay++
	}
	a.gpuCounts.mu.Unlock()
	if xid == 48 && a.nvml == nil {
		a.countAggregateDBE(gpu)
	}
	a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Metrics{Metrics: a.sampleNode()}})
}

func (a *Agent) gpuCount(gpu int) gpuCount {
	a.gpuCounts.mu.Lock()
	defer a.gpuCounts.mu.Unlock()
	if c := a.gpuCounts.byGPU[gpu]; c != nil {
		return *c
	}
	return gpuCount{}
}

// resetGPUCounts starts the GPU's volatile counts again after a reset, as the driver does; its
// Xid total (hale's own count) stays.
func (a *Agent) resetGPUCounts(gpu int) {
	a.gpuCounts.mu.Lock()
	defer a.gpuCounts.mu.Unlock()
	if c := a.gpuCounts.byGPU[gpu]; c != nil {
		*c = gpuCount{xids: c.xids}
	}
}

// eccAggregateFile holds the simulated GPUs' lifetime ECC counts in the agent's state
// directory, by UUID: a reboot keeps them, as a GPU's InfoROM does; a replacement's GPUs are
// new ones.
const eccAggregateFile = "gpu-ecc-aggregate.json"

type eccCounts struct{ SBE, DBE uint64 }

// eccAggregates reads the simulated GPUs' lifetime ECC counts (none when never written).
func (a *Agent) eccAggregates() map[string]eccCounts {
	out := map[string]eccCounts{}
	if b, err := os.ReadFile(filepath.Join(a.cfg.StateDir, eccAggregateFile)); err == nil {
		json.Unmarshal(b, &out)
	}
	return out
}

// countAggregateDBE counts a double-bit ECC error in the lifetime count of simulated GPU gpu.
func (a *Agent) countAggregateDBE(gpu int) {
	devs, _ := a.simulatedDevices()
	for _, d := range devs {
		if d.Kind != "gpu" || int(d.Index) != gpu {
			continue
		}
		a.gpuCounts.mu.Lock() // one writer of the file at a time
		agg := a.eccAggregates()
		c := agg[d.Uuid]
		c.DBE++
		agg[d.Uuid] = c
		b, _ := json.Marshal(agg)
		writeFileAtomic(filepath.Join(a.cfg.StateDir, eccAggregateFile), b, 0o600)
		a.gpuCounts.mu.Unlock()
	}
}

// SimulatedDriverDir is the simulated GPUs' driver state on a local node: a tmpfs of the node's
// own (the local provider mounts it), so a reboot empties it as it reloads a real driver. A
// file throttle-<index> there holding "thermal" or "power" makes that GPU hold its clocks down
// for that reason from the file's modification time (hale debug inject-fault --throttle).
const SimulatedDriverDir = "/run/nvidia-sim"

// throttle applies a simulated GPU's clock throttling: the violation time since it began, and
// a thermal one's temperature, above HyperPod's critical 85 C.
func throttle(g *agentproto.GPUMetrics, index int, now time.Time) {
	path := filepath.Join(SimulatedDriverDir, "throttle-"+strconv.Itoa(index))
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	us := uint64(max(0, now.Sub(fi.ModTime()).Microseconds()))
	switch strings.TrimSpace(string(b)) {
	case "thermal":
		g.ThermalViolationUs, g.GpuTempC = us, 92
	case "power":
		g.PowerViolationUs = us
	}
}

// readViolations reads how long NVML says the GPU's clocks were held down for each reason,
// in microseconds as DCGM reports them (NVML counts nanoseconds).
func readViolations(dev nvml.Device, g *agentproto.GPUMetrics) {
	for _, v := range []struct {
		policy nvml.PerfPolicyType
		to     *uint64
	}{{nvml.PERF_POLICY_POWER, &g.PowerViolationUs}, {nvml.PERF_POLICY_THERMAL, &g.ThermalViolationUs},
		{nvml.PERF_POLICY_SYNC_BOOST, &g.SyncBoostViolationUs}, {nvml.PERF_POLICY_BOARD_LIMIT, &g.BoardLimitViolationUs},
		{nvml.PERF_POLICY_LOW_UTILIZATION, &g.LowUtilViolationUs}, {nvml.PERF_POLICY_RELIABILITY, &g.ReliabilityViolationUs}} {
		if t, ret := dev.GetViolationStatus(v.policy); ret == nvml.SUCCESS {
			*v.to = t.ViolationTime / 1000
		}
	}
}

// readNVLinkErrors sums NVML's data-link error counters over the GPU's active links (a GPU
// without NVLink answers none).
func readNVLinkErrors(dev nvml.Device, g *agentproto.GPUMetrics) {
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		if st, ret := dev.GetNvLinkState(link); ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
			continue
		}
		for _, c := range []struct {
			counter nvml.NvLinkErrorCounter
			to      *uint64
		}{{nvml.NVLINK_ERROR_DL_CRC_FLIT, &g.NvlinkCrcFlitErrors}, {nvml.NVLINK_ERROR_DL_CRC_DATA, &g.NvlinkCrcDataErrors},
			{nvml.NVLINK_ERROR_DL_REPLAY, &g.NvlinkReplayErrors}, {nvml.NVLINK_ERROR_DL_RECOVERY, &g.NvlinkRecoveryErrors}} {
			if v, ret := dev.GetNvLinkErrorCounter(link, c.counter); ret == nvml.SUCCESS {
				*c.to += v
			}
		}
	}
}

// filesystems are the statfs of the root and the agent's disk paths, each once, labelled as
// node-exporter labels them (device and fstype from the mount table).
func (a *Agent) filesystems() []*agentproto.Filesystem {
	mounts := map[string]*procfs.MountInfo{}
	if ms, err := procfs.GetMounts(); err == nil {
		for _, m := range ms {
			mounts[m.MountPoint] = m // the last mount of a point is the one seen
		}
	}
	var out []*agentproto.Filesystem
	seen := map[string]bool{}
	for _, p := range append([]string{"/"}, a.cfg.DiskPaths...) {
		if seen[p] || len(out) == agentproto.MaxFilesystems {
			continue
		}
		seen[p] = true
		var st unix.Statfs_t
		if unix.Statfs(p, &st) != nil {
			continue
		}
		f := &agentproto.Filesystem{Mountpoint: p, SizeBytes: st.Blocks * uint64(st.Bsize), AvailBytes: st.Bavail * uint64(st.Bsize),
			FreeBytes: st.Bfree * uint64(st.Bsize)}
		if m := mounts[p]; m != nil {
			f.Device, f.Fstype = m.Source, m.FSType
		}
		out = append(out, f)
	}
	return out
}
