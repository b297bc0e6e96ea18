package agentproto

import (
	"time"

	"github.com/haleproject/hale/internal/health"
)

// NewFinding is a health finding as it crosses the wire from an agent: monitor names what made
// it (kernel-log, nvml, checks, ...), observed is when. Time, Uptime and Repeat stay on the
// node: the server judges by when a finding was observed, and repeat rules come from its own
// catalog. This and Health are the only conversions between the two, so a field added to
// one side is added here (TestFindingRoundTrip fails otherwise).
func NewFinding(f health.Finding, monitor string, observed time.Time) *Finding {
	return &Finding{Fault: f.Fault, Action: string(f.Action), Xid: int32(f.Xid), Pci: f.PCI, Gpu: int32(f.GPU),
		Meaning: f.Meaning, Source: f.Source, Evidence: f.Evidence, Monitor: monitor, ObservedUnixMs: observed.UnixMilli(),
		Cause: int32(f.Cause), Pid: int32(f.PID), Process: f.Process, Job: f.Job, Lines: int32(f.Lines)}
}

// Health is the finding as the health package knows it.
func (pf *Finding) Health() health.Finding {
	return health.Finding{Fault: pf.Fault, Action: health.Action(pf.Action), Xid: int(pf.Xid), PCI: pf.Pci, GPU: int(pf.Gpu),
		Meaning: pf.Meaning, Source: pf.Source, Evidence: pf.Evidence, Cause: int(pf.Cause), PID: int(pf.Pid), Process: pf.Process,
		Job: pf.Job, Lines: int(pf.Lines)}
}
