package health

import "testing"

// BenchmarkToolFindingKernelLine: the cost the tool readers add to every ordinary kernel line.
func BenchmarkToolFindingKernelLine(b *testing.B) {
	c := Default()
	lines := []string{
		"NVRM: Xid (PCI:0000:0a:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 11",
		"ena 0000:00:05.0 eth0: Link is Up",
		"watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python3:1234]",
		"nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate",
	}
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			if _, ok := c.toolFinding(l); ok {
				b.Fatal(l)
			}
		}
	}
}
