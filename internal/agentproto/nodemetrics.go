package agentproto

// The bounds of a NodeMetrics sample, so that a node's series on the server's /metrics stay
// bounded whatever the node has (docs/observability.md, "Cardinality"): the agent sends no
// more, and the server shows no more of what an agent sends.
const (
	// MaxNetInterfaces is the most network interfaces a sample carries (by name order; the
	// agent leaves out loopback and container interfaces).
	MaxNetInterfaces = 16
	// MaxGPUs is the most GPUs a sample carries (the largest instance types have 8 or 16).
	MaxGPUs = 16
	// MaxFilesystems is the most file systems a sample carries: the root and the node's own
	// data disks.
	MaxFilesystems = 4
)

// CPUModes are the CPU modes a sample carries, node-exporter's (/proc/stat's) without the guest
// modes, which the kernel counts within user and nice already.
var CPUModes = []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
