package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/topology"
)

// NVML, when the node has NVIDIA's driver (libnvidia-ml.so): the real GPUs replace the
// simulated ones in the inventory, and the monitor reports Xid events (NVML's critical Xid
// event), a device count below the instance type's, pending or failed row remaps, and new
// uncorrectable ECC errors. Without the driver (hale's local nodes, CI) openNVML returns nil
// and the simulated devices stand in.

// nvmlPollInterval is how often device counters are read (events arrive as they happen).
const nvmlPollInterval = 5 * time.Second

type nvmlMonitor struct {
	log  *slog.Logger
	mu   sync.Mutex
	devs []*nvmlDev
}

type nvmlDev struct {
	index   int
	dev     nvml.Device
	uuid    string
	name    string
	pci     string // 0000:a1:00, as Xid lines name it
	memMiB  int64
	ecc     uint64
	pending bool
	failed  bool
}

// openNVML initialises NVML; nil when there is no driver.
func openNVML(log *slog.Logger) (m *nvmlMonitor) {
	defer func() {
		if recover() != nil { // a library that cannot be loaded must not take the agent down
			m = nil
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil
	}
	m = &nvmlMonitor{log: log}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		log.Warn("nvml: device count", "error", nvml.ErrorString(ret))
	}
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			log.Warn("nvml: device handle", "index", i, "error", nvml.ErrorString(ret))
			continue
		}
		nd := &nvmlDev{index: i, dev: d}
		nd.uuid, _ = d.GetUUID()
		nd.name, _ = d.GetName()
		if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			nd.pci = health.ShortPCI(cString(p.BusId[:]))
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			nd.memMiB = int64(mem.Total >> 20)
		}
		nd.ecc, _ = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		m.devs = append(m.devs, nd)
	}
	log.Info("nvml: driver found", "devices", len(m.devs))
	return m
}

func (m *nvmlMonitor) close() { nvml.Shutdown() }

func cString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

func (m *nvmlMonitor) indexOfPCI(pci string) int {
	for _, d := range m.devs {
		if strings.EqualFold(d.pci, pci) {
			return d.index
		}
	}
	return -1
}

// accelerators is the inventory of the real GPUs.
func (m *nvmlMonitor) accelerators() []*agentproto.Accelerator {
	var out []*agentproto.Accelerator
	for _, d := range m.devs {
		out = append(out, &agentproto.Accelerator{Index: int32(d.index), Kind: "gpu", Model: d.name, Uuid: d.uuid, MemoryMib: d.memMiB,
			Healthy: !d.failed, DevicePath: fmt.Sprintf("/dev/nvidia%d", d.index)})
	}
	return out
}

// watch reports NVML's Xid events as they come and polls the counters.
func (m *nvmlMonitor) watch(ctx context.Context, a *Agent) {
	set, ret := nvml.EventSetCreate()
	if ret == nvml.SUCCESS {
		defer set.Free()
		for _, d := range m.devs {
			if ret := d.dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
				m.log.Warn("nvml: Xid events", "gpu", d.index, "error", nvml.ErrorString(ret))
			}
		}
	}
	last := time.Time{}
	for ctx.Err() == nil {
		if set != nil {
			if e, ret := set.Wait(500); ret == nvml.SUCCESS && e.EventType == nvml.EventTypeXidCriticalError {
				pci := ""
				if p, ret := e.Device.GetPciInfo(); ret == nvml.SUCCESS {
					pci = health.ShortPCI(cString(p.BusId[:]))
				}
				line := fmt.Sprintf("NVRM: Xid (PCI:%s): %d, reported by NVML's critical Xid event", pci, e.EventData)
				if f, ok := health.Default().ClassifyLine(line); ok {
					a.report(f, "nvml")
				}
			}
		} else {
			time.Sleep(500 * time.Millisecond)
		}
		if time.Since(last) >= nvmlPollInterval {
			last = time.Now()
			for _, f := range m.findings(a.cfg.InstanceType, false) {
				a.report(f, "nvml")
			}
		}
	}
}

// findings reads the counters: a count below the instance type's, remaps, new ECC errors. With
// all (a check) it reports every standing problem, else only changes.
func (m *nvmlMonitor) findings(instanceType string, all bool) []health.Finding {
	m.mu.Lock()
	defer m.mu.Unlock()
	cat := health.Default()
	var out []health.Finding
	n, ret := nvml.DeviceGetCount()
	if it, ok := topology.Lookup(instanceType); ok && it.Accelerators != nil && it.Accelerators.Kind == "gpu" && ret == nvml.SUCCESS && n < it.Accelerators.Count {
		out = append(out, cat.FaultFinding("gpu.count_mismatch", fmt.Sprintf("NVML sees %s, %s has %d", plural.Count(n, "GPU", "GPUs"), instanceType, it.Accelerators.Count)))
	}
	for _, d := range m.devs {
		if _, _, pending, failed, ret := d.dev.GetRemappedRows(); ret == nvml.SUCCESS {
			if failed && (all || !d.failed) {
				f := cat.FaultFinding("gpu.memory.remap_failure", fmt.Sprintf("GPU %d (%s): NVML reports a row remapping failure", d.index, d.pci))
				f.Action, f.GPU, f.PCI = health.Replace, d.index, d.pci
				out = append(out, f)
			}
			if pending && (all || !d.pending) {
				f := cat.FaultFinding("gpu.memory.remap_pending", fmt.Sprintf("GPU %d (%s): NVML reports a row remap pending", d.index, d.pci))
				f.GPU, f.PCI = d.index, d.pci
				out = append(out, f)
			}
			d.pending, d.failed = pending, failed
		} else if ret != nvml.ERROR_NOT_SUPPORTED && all {
			f := cat.FaultFinding("gpu.device_unhealthy", fmt.Sprintf("GPU %d (%s): NVML: %s", d.index, d.pci, nvml.ErrorString(ret)))
			f.GPU, f.PCI = d.index, d.pci
			out = append(out, f)
		}
		if ecc, ret := d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			if ecc > d.ecc {
				f := cat.FaultFinding("gpu.ecc.uncorrectable", fmt.Sprintf("GPU %d (%s): volatile uncorrectable ECC errors %d -> %d", d.index, d.pci, d.ecc, ecc))
				f.GPU, f.PCI = d.index, d.pci
				out = append(out, f)
			}
			d.ecc = ecc
		}
	}
	return out
}
