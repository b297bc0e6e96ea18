package health

import (
	"regexp"
	"strings"
)

// hungTaskReader reads the call trace the kernel prints after a hung-task report ("INFO: task
// python3:4242 blocked for more than 122 seconds.", then "Call Trace:" and one frame a line).
// A trace that runs through the NVIDIA driver (a frame of its modules: "[nvidia]",
// "[nvidia_uvm]") is a task stuck in the GPU driver, as a wedged GPU leaves them:
// kernel.hung_task_gpu, which escalates as a soft lockup does. The report stays
// kernel.hung_task (an event) whatever its trace; an ordinary hung task (a slow disk, an NFS
// server) asks for nothing.
type hungTaskReader struct {
	c      *Catalog
	report string // the hung-task line whose trace is being read
	left   int    // lines of it still looked at
}

var (
	hungTaskRE    = regexp.MustCompile(`task \S+:\d+ blocked for more than \d+ seconds`)
	nvidiaFrameRE = regexp.MustCompile(`\[nvidia(?:_uvm|_modeset|_drm|_peermem)?\]`)
)

// hungTraceLines is how many lines after a hung-task report its trace is looked for in: the
// kernel prints the task's state, a hint and about 10-40 frames.
const hungTraceLines = 64

func (b *hungTaskReader) line(raw string) ([]Finding, bool) {
	if hungTaskRE.MatchString(raw) {
		b.report, b.left = strings.TrimSpace(raw), hungTraceLines
		return nil, false
	}
	if b.left == 0 {
		return nil, false
	}
	b.left--
	if !nvidiaFrameRE.MatchString(raw) {
		return nil, false
	}
	b.left = 0
	e := b.c.byFault["kernel.hung_task_gpu"]
	r := ParseLine(b.report)
	return []Finding{{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: e.Meaning, Source: e.Source,
		Evidence: b.report + "\n" + strings.TrimSpace(raw), Lines: 2, Time: r.Time, Uptime: r.Uptime}}, false
}

func (b *hungTaskReader) end() []Finding { return nil }
