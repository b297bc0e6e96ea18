package health

// toolTable is what hale knows of other monitors' and tools' codes (tools.yaml).
type toolTable struct{}

func loadTools(b []byte, c *Catalog) (*toolTable, error) { return &toolTable{}, nil }

// toolFinding classifies one line that another monitor or tool wrote (an NVSentinel
// HealthEvent, a DCGM error code, an EKS node monitoring agent condition, a line of NVIDIA's
// Xid catalog); ok is false for any other message.
func (c *Catalog) toolFinding(msg string) (Finding, bool) { return Finding{}, false }

// toolBlocks returns fresh readers of the multi-line tool outputs hale knows (dcgmi diag,
// dcgmi health, dcgmi nvlink --link-status).
func (c *Catalog) toolBlocks(opt Options) []blockReader { return nil }
