// Package ettr estimates a long training job's effective training time ratio (ETTR: the share
// of wall time spent on progress that is kept) on a hale cluster. It draws interruptions at the
// rates Meta published for Llama 3's pre-training (466 in 54 days on 2,048 nodes of 8 H100s,
// by cause; research anchors.md §1.2), has a Repairer (hale's real controller and policy, in
// the tests' harness) handle each node fault, and the job restart as hale's srun does
// (internal/runpolicy's ladder). It reports ETTR, the time lost by kind and by cause, and the
// repairs made. docs/performance.md, "Effective training time", shows the results.
package ettr

import "fmt"

// Kind is how an interruption reaches hale.
type Kind string

const (
	// NodeFault: the node's agent reports a fault of hale's catalog (an Xid, a GSP timeout, a
	// link down); the job's ranks there die with it.
	NodeFault Kind = "node fault"
	// NodeLost: the machine dies (a power supply, a chassis, a CPU): its agent goes silent.
	NodeLost Kind = "node lost"
	// AppCrash: the job fails on healthy nodes (a software bug, a dependency): the run policy
	// restarts it.
	AppCrash Kind = "application crash"
	// Hang: the job stops making progress without failing (an NCCL watchdog timeout, silent data
	// corruption found by its loss): the run policy's rule finds it after its interval.
	Hang Kind = "hang"
	// Planned: maintenance with notice: the job checkpoints and restarts whole.
	Planned Kind = "planned"
)

// Cause is one line of the published table: how many interruptions it caused in the 54 days,
// how it reaches hale, and for a NodeFault what the agent reads: a kernel log line (Line, which
// hale's classifier reads as the agent's does) or a monitor's fault (Fault, a catalog id).
type Cause struct {
	Name  string
	Count int
	Kind  Kind
	Line  string
	Fault string
}

// xid is the kernel line of an Xid as the NVIDIA driver prints it.
func xid(n int, text string) string {
	return fmt.Sprintf("NVRM: Xid (PCI:0000:53:00): %d, pid='<unknown>', name=<unknown>, %s", n, text)
}

// Llama3 is the Llama 3 405B pre-training's interruptions ("The Llama 3 Herd of Models", 2024,
// Table 5; anchors.md §1.2): 419 unexpected and 47 planned in 54 days on 16,384 H100s (2,048
// nodes). Each cause is mapped to what hale sees of it: GPU faults to the catalog fault their Xid
// is (Xid 79 off the bus, 48 double-bit ECC, 95 uncontained error, 119 GSP timeout), machine
// deaths to a silent agent, software failures to an application crash the run policy restarts,
// NCCL watchdog timeouts and silent data corruption to hangs its rules find.
var Llama3 = []Cause{
	{Name: "Faulty GPU", Count: 148, Kind: NodeFault, Line: xid(79, "GPU has fallen off the bus.")},
	{Name: "GPU HBM3 memory", Count: 72, Kind: NodeFault, Line: xid(48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.")},
	{Name: "Software bug", Count: 54, Kind: AppCrash},
	{Name: "Network switch/cable", Count: 35, Kind: NodeFault, Fault: "network.link_down"},
	{Name: "Host maintenance", Count: 32, Kind: NodeLost},
	{Name: "GPU SRAM memory", Count: 19, Kind: NodeFault, Line: xid(95, "Uncontained: FBHUB. RST: Yes, D-RST: No")},
	{Name: "GPU system processor", Count: 17, Kind: NodeFault, Line: xid(119, "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).")},
	{Name: "NIC", Count: 7, Kind: NodeFault, Fault: "network.link_down"},
	{Name: "NCCL watchdog timeout", Count: 7, Kind: Hang},
	{Name: "Silent data corruption", Count: 6, Kind: Hang},
	{Name: "GPU thermal interface and sensor", Count: 6, Kind: NodeFault, Line: xid(55, "temperature read error")},
	{Name: "SSD", Count: 3, Kind: NodeLost},
	{Name: "Power supply", Count: 3, Kind: NodeLost},
	{Name: "Server chassis", Count: 2, Kind: NodeLost},
	{Name: "IO expansion board", Count: 2, Kind: NodeLost},
	{Name: "Dependency", Count: 2, Kind: AppCrash},
	{Name: "CPU", Count: 2, Kind: NodeLost},
	{Name: "System memory", Count: 2, Kind: NodeLost},
	{Name: "Planned maintenance", Count: 47, Kind: Planned},
}

// Llama3NodeHours is the exposure the counts are over: 2,048 nodes for 54 days.
const Llama3NodeHours = 2048 * 54 * 24
