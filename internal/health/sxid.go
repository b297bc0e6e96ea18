package health

// sxidTable is the NVSwitch SXid catalog (sxids.yaml).
type sxidTable struct{}

func loadSXids(b []byte) (*sxidTable, error) { return &sxidTable{}, nil }

// sxidFinding classifies an NVSwitch SXid line ("nvidia-nvswitch1: SXid (PCI:...): 20009,
// Non-fatal, ..."); ok is false for any other message.
func (c *Catalog) sxidFinding(msg string) (Finding, bool) { return Finding{}, false }
