package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
)

// The agent's health monitors. Each reports what it finds as a Finding, classified by
// internal/health's catalog, within a second: the kernel logs (/dev/kmsg on a machine, the
// node's own log file on the local provider), the accelerators, the supervised daemons, the
// disks and the network interfaces. Findings made while the server is unreachable wait for
// the next session.

// monitorInterval is how often the file-based monitors look.
const (
	kernelLogInterval = 100 * time.Millisecond
	deviceInterval    = 500 * time.Millisecond
	diskInterval      = 2 * time.Second
	// diskFullPercent is when a file system counts as full.
	diskFullPercent = 97
)

// report sends a finding to the server and appends it to the node's findings log.
func (a *Agent) report(f health.Finding, monitor string) {
	pf := ProtoFinding(f, monitor)
	if pf.Gpu < 0 && f.PCI != "" {
		pf.Gpu = int32(a.gpuOfPCI(f.PCI))
	}
	a.log.Warn("finding", "fault", f.Fault, "action", f.Action, "monitor", monitor, "evidence", f.Evidence)
	if b, err := json.Marshal(pf); err == nil {
		appendLine(filepath.Join(a.cfg.StateDir, "findings.log"), b)
	}
	a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Finding{Finding: pf}})
	a.xidSeen(int(pf.Gpu), pf.Xid)
	a.gpuFound(int(pf.Gpu), f.Action)
}

// ProtoFinding is a finding as the agent sends it to the server (monitor names the monitor
// that made it), with the job of the process it names when that process still runs.
func ProtoFinding(f health.Finding, monitor string) *agentproto.Finding {
	if f.Job == "" && f.PID > 0 {
		f.Job = jobOfPID(f.PID)
	}
	return agentproto.NewFinding(f, monitor, time.Now())
}

func appendLine(path string, b []byte) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

// startMonitors starts every monitor; they stop with ctx.
func (a *Agent) startMonitors(ctx context.Context) {
	for _, path := range a.cfg.KernelLogs {
		go a.watchKernelLog(ctx, path)
	}
	go a.watchDevices(ctx)
	go a.watchDisks(ctx)
	go a.watchNICs(ctx)
	if a.nvml != nil {
		go a.nvml.watch(ctx, a)
	}
}

// jobOfPID is the Slurm job a process belongs to ("" when it cannot tell, as for a process
// that already ended): its SLURM_JOB_ID, else the job_N of its cgroup (slurmstepd's).
func jobOfPID(pid int) string {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, "SLURM_JOB_ID="); ok && v != "" {
				return v
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
		if m := cgroupJobRE.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return ""
}

var cgroupJobRE = regexp.MustCompile(`/job_(\d+)(?:/|$)`)

// watchKernelLog follows a kernel log and classifies each new line. /dev/kmsg (the device) is read record by
// record from its end; a file is followed from where the agent last stopped (kept in the
// state directory, so lines written while the agent was down are not missed, and lines read
// before a reboot are not reported twice), or from its end the first time.
func (a *Agent) watchKernelLog(ctx context.Context, path string) {
	if st, err := os.Stat(path); path == "/dev/kmsg" && (err != nil || st.Mode()&os.ModeCharDevice != 0) {
		a.watchKmsg(ctx)
		return
	}
	// Anything else, /dev/kmsg too where it is a plain file (a container's, or a host of
	// scripts/testhosts.sh, whose kernel is shared), is a text file of lines.
	stream := health.Default().NewStream(health.Options{InstanceType: a.cfg.InstanceType})
	mark := filepath.Join(a.cfg.StateDir, "kernel-log-"+strings.ReplaceAll(strings.Trim(path, "/"), "/", "_")+".offset")
	var offset int64 = -1
	var inode uint64
	if b, err := os.ReadFile(mark); err == nil {
		fmt.Sscanf(string(b), "%d %d", &inode, &offset)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// The node's own log file (local provider): it exists from the start, so that lines
		// written to it are always read.
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
	tick := time.NewTicker(kernelLogInterval)
	defer tick.Stop()
	var partial string
	saved := ""
	for {
		if st, err := os.Stat(path); err == nil {
			var ino uint64
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				ino = sys.Ino
			}
			switch {
			case offset < 0: // never read: start at its end
				inode, offset = ino, st.Size()
			case ino != inode || st.Size() < offset: // rotated or truncated: the new file from its start
				inode, offset, partial = ino, 0, ""
			}
			if st.Size() > offset {
				if f, err := os.Open(path); err == nil {
					f.Seek(offset, io.SeekStart)
					data, _ := io.ReadAll(io.LimitReader(f, 4<<20))
					f.Close()
					offset += int64(len(data))
					lines := strings.Split(partial+string(data), "\n")
					partial = lines[len(lines)-1]
					// The lines of one write are one moment: a driver's burst for one fault
					// goes to the server as one finding (an episode) with all its lines and
					// the process its last line names. Ignore-class findings lose nothing by
					// waiting for the batch; every batch is reported at once.
					var fs []health.Finding
					for _, line := range lines[:len(lines)-1] {
						fs = append(fs, stream.Line(line)...)
					}
					for _, fnd := range health.Episodes(fs, health.Default().Policy.EpisodeWindow) {
						a.report(fnd, "kernel-log")
					}
				}
			}
			if now := fmt.Sprintf("%d %d", inode, offset-int64(len(partial))); now != saved {
				os.WriteFile(mark, []byte(now), 0o600)
				saved = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// watchKmsg reads /dev/kmsg from its end: each read returns one record.
func (a *Agent) watchKmsg(ctx context.Context) {
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		a.log.Warn("kernel log monitor", "error", err)
		return
	}
	go func() { <-ctx.Done(); f.Close() }()
	f.Seek(0, io.SeekEnd)
	stream := health.Default().NewStream(health.Options{InstanceType: a.cfg.InstanceType})
	buf := make([]byte, 8192)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, syscall.EPIPE) { // records were overwritten before we read them
				continue
			}
			return
		}
		for _, fnd := range stream.Line(strings.TrimRight(string(buf[:n]), "\n")) {
			a.report(fnd, "kernel-log")
		}
	}
}

// deviceState is what the device monitor last saw, so it reports changes only.
type deviceState struct {
	mu        sync.Mutex
	missing   map[int]bool
	unhealthy map[int]bool
}

// watchDevices compares the accelerators present with the instance type's: a missing device
// (fallen off the bus) or one marked unhealthy is reported once, when it happens.
func (a *Agent) watchDevices(ctx context.Context) {
	tick := time.NewTicker(deviceInterval)
	defer tick.Stop()
	for {
		for _, f := range a.deviceFindings(false) {
			a.report(f, "devices")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// deviceFindings checks the simulated devices (a real machine's come from NVML): count and
// health. With all, it returns every problem (a check), else only new ones (the monitor).
func (a *Agent) deviceFindings(all bool) []health.Finding {
	devs, err := a.simulatedDevices()
	if err != nil || len(devs) == 0 {
		return nil
	}
	cat := health.Default()
	a.devState.mu.Lock()
	defer a.devState.mu.Unlock()
	if a.devState.missing == nil {
		a.devState.missing, a.devState.unhealthy = map[int]bool{}, map[int]bool{}
	}
	var out []health.Finding
	present := 0
	for _, d := range devs {
		i := int(d.Index)
		lost := d.DevicePath != "" && !exists(d.DevicePath)
		if !lost {
			present++
		}
		if lost && (all || !a.devState.missing[i]) {
			f := cat.FaultFinding("gpu.count_mismatch", fmt.Sprintf("%s %d (%s, %s) is gone: %d of %s present", d.Kind, i, d.Uuid, d.DevicePath, countPresent(devs), plural.Count(len(devs), "device", "devices")))
			f.GPU = i
			out = append(out, f)
		}
		a.devState.missing[i] = lost
		bad := !d.Healthy && !lost
		if bad && (all || !a.devState.unhealthy[i]) {
			f := cat.FaultFinding("gpu.device_unhealthy", fmt.Sprintf("%s %d (%s) reports unhealthy", d.Kind, i, d.Uuid))
			f.GPU = i
			out = append(out, f)
		}
		a.devState.unhealthy[i] = bad
	}
	return out
}

// onBus reports whether a device is there to use: healthy, and its device file (if it has one)
// present.
func onBus(d *agentproto.Accelerator) bool {
	return d.Healthy && (d.DevicePath == "" || exists(d.DevicePath))
}

func countPresent(devs []*agentproto.Accelerator) int {
	n := 0
	for _, d := range devs {
		if d.DevicePath == "" || exists(d.DevicePath) {
			n++
		}
	}
	return n
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// simulatedDevices reads the node's simulated accelerators as they are now.
func (a *Agent) simulatedDevices() ([]*agentproto.Accelerator, error) {
	b, err := os.ReadFile(filepath.Join(a.cfg.StateDir, SimulatedDevicesFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var devs []*agentproto.Accelerator
	return devs, json.Unmarshal(b, &devs)
}

// gpuOfPCI maps an Xid line's PCI address to the GPU's index (-1 when unknown).
func (a *Agent) gpuOfPCI(pci string) int {
	if a.nvml != nil {
		if i := a.nvml.indexOfPCI(pci); i >= 0 {
			return i
		}
	}
	devs, _ := a.simulatedDevices()
	for _, d := range devs {
		if d.Kind == "gpu" && strings.EqualFold(SimulatedPCI(int(d.Index)), pci) {
			return int(d.Index)
		}
	}
	return -1
}

// SimulatedPCI is the PCI address of simulated GPU i, as its Xid lines name it.
func SimulatedPCI(i int) string { return fmt.Sprintf("0000:%02x:00", 0x10+i) }

// watchDisks reports a file system that is nearly full, once each time it fills.
func (a *Agent) watchDisks(ctx context.Context) {
	full := map[string]bool{}
	tick := time.NewTicker(diskInterval)
	defer tick.Stop()
	for {
		for _, p := range a.cfg.DiskPaths {
			used, ok := diskUsedPercent(p)
			if !ok {
				continue
			}
			if used >= diskFullPercent && !full[p] {
				a.report(health.Default().FaultFinding("disk.full", fmt.Sprintf("%s is %d%% full", p, used)), "disk")
			}
			full[p] = used >= diskFullPercent
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func diskUsedPercent(path string) (int, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil || st.Blocks == 0 {
		return 0, false
	}
	used := st.Blocks - st.Bfree
	return int(used * 100 / (used + st.Bavail)), true
}

// watchNICs reports a network interface that was up when the agent started and has stayed
// down for linkDownConfirm: a link that flaps for a moment (a switch port renegotiating, a cut
// cable put back) is no broken node, and replacing a node for it would cost a healthy one.
// The interfaces are read from the kernel for the agent's own network namespace (netlink,
// through package net), not from /sys/class/net: a sysfs mounted outside the namespace lists
// the host's interfaces, and on the local provider every other node's veth going away would
// read as this node's link going down.
func (a *Agent) watchNICs(ctx context.Context) {
	watched := nicStates() // the interfaces up at the start
	downSince := map[string]time.Time{}
	reported := map[string]bool{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := nicStates()
		for n, wasUp := range watched {
			if !wasUp {
				continue
			}
			if now[n] {
				delete(downSince, n)
				reported[n] = false
				continue
			}
			if downSince[n].IsZero() {
				downSince[n] = time.Now()
			}
			if d := time.Since(downSince[n]); d >= linkDownConfirm && !reported[n] {
				reported[n] = true
				a.report(health.Default().FaultFinding("network.link_down", fmt.Sprintf("interface %s is down (for %s)", n, d.Round(time.Second))), "network")
			}
		}
	}
}

// linkDownConfirm is how long an interface must stay down to be a fault.
const linkDownConfirm = 10 * time.Second

// nicStates maps each non-loopback interface of the namespace to whether it is up and running.
func nicStates() map[string]bool {
	ifs, _ := net.Interfaces()
	out := map[string]bool{}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			out[i.Name] = i.Flags&net.FlagUp != 0 && i.Flags&net.FlagRunning != 0
		}
	}
	return out
}
