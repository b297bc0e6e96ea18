package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// openFault is what a node's open repair says is wrong with it: the fault and, when the finding
// behind the repair named one, the GPU (its index, -1 when unknown, and PCI address) and Xid.
type openFault struct {
	Fault string
	GPU   int
	PCI   string
	Xid   int
}

// findingLookback is how far before its repair the console looks for the finding that opened
// it: a finding is an episode (internal/health) that may have begun a while before it was
// judged worth a repair.
const findingLookback = 24 * time.Hour

// openFaults returns the open repairs' faults of a cluster's nodes, by logical id. The GPU comes
// from the finding that opened the repair (store.Finding.RepairID), since a repair records its
// GPU only when it resets one (a ResetGPU) or was escalated by a finding naming one; failing
// that, from the repair itself when it names a GPU.
func openFaults(tx store.Tx, clusterID string) (map[string]*openFault, error) {
	rs, err := tx.OpenRepairs(clusterID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*openFault, len(rs))
	for _, rp := range rs {
		of := &openFault{Fault: rp.Fault, GPU: -1}
		// A repair's GPU and PCI are set only for a ResetGPU or by an escalating finding;
		// otherwise its GPU is the zero value, not GPU 0.
		if rp.Action == store.RepairResetGPU || rp.PCI != "" {
			of.GPU, of.PCI = rp.GPU, rp.PCI
		}
		fs, err := tx.FindingsOf(clusterID, rp.LogicalID, rp.CreatedAt.Add(-findingLookback))
		if err != nil {
			return nil, err
		}
		for _, f := range fs { // the latest finding of the repair's fault that names it
			if f.RepairID != rp.ID || f.Fault != rp.Fault {
				continue
			}
			of.Xid = f.Xid
			if f.GPU >= 0 {
				of.GPU = f.GPU
			}
			if f.PCI != "" {
				of.PCI = f.PCI
			}
		}
		out[rp.LogicalID] = of
	}
	return out, nil
}

// gpuFault reports whether the fault is a GPU's: it names a GPU, an Xid, or is one of the
// catalog's gpu.* faults (internal/health/catalog.yaml).
func (f *openFault) gpuFault() bool {
	return f.GPU >= 0 || f.PCI != "" || f.Xid != 0 || strings.HasPrefix(f.Fault, "gpu.")
}

// note is the line under a node's health badge for its open repair: "GPU 0 faulted (Xid 79)",
// "GPU 0000:3b:00 faulted (gpu.bus_lost)", "A GPU faulted (gpu.ecc)", or the fault itself
// ("Fault: node.unreachable") when it is not a GPU's.
func (f *openFault) note() string {
	what := f.Fault
	if f.Xid != 0 {
		what = fmt.Sprintf("Xid %d", f.Xid)
	}
	switch {
	case f.GPU >= 0:
		return fmt.Sprintf("GPU %d faulted (%s)", f.GPU, what)
	case f.PCI != "":
		return fmt.Sprintf("GPU %s faulted (%s)", f.PCI, what)
	case f.gpuFault():
		return fmt.Sprintf("A GPU faulted (%s)", what)
	case f.Fault != "":
		return "Fault: " + f.Fault
	}
	return ""
}
