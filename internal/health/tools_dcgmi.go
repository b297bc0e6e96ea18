package health

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The multi-line outputs of dcgmi (NVIDIA/DCGM dcgmi/): `dcgmi diag -r N` (Diag.cpp), `dcgmi
// health -c` (Health.cpp) and `dcgmi nvlink -s` / `--link-status` (Nvlink.cpp). Each reader
// waits for its output's first line, takes the output's lines from the stream (they are not log
// lines) and gives its findings when the output ends.

// toolBlocks returns fresh readers of the multi-line tool outputs hale knows (dcgmi diag,
// dcgmi health, dcgmi nvlink --link-status).
func (c *Catalog) toolBlocks(opt Options) []blockReader {
	if c.tools == nil {
		return nil
	}
	links, known := c.ExpectedNVLinks(opt.InstanceType)
	return []blockReader{
		&diagReader{c: c, links: links, linksKnown: known},
		&healthReader{c: c, links: links, linksKnown: known},
		&nvlinkReader{c: c, links: links, linksKnown: known},
	}
}

// dcgmiCells splits a row of dcgmi's boxes ("| name | value |") into its two cells; ok is
// false for a line that is not such a row.
func dcgmiCells(raw string) (name, value string, ok bool) {
	t := strings.TrimSpace(raw)
	if !strings.HasPrefix(t, "|") {
		return "", "", false
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
	i := strings.IndexByte(t, '|')
	if i < 0 {
		return strings.TrimSpace(t), "", true
	}
	return strings.TrimSpace(t[:i]), strings.TrimSpace(t[i+1:]), true
}

// isDcgmiTableLine tells a line of a dcgmi box: a row or a rule.
func isDcgmiTableLine(raw string) bool {
	t := strings.TrimSpace(raw)
	return strings.HasPrefix(t, "|") || strings.HasPrefix(t, "+")
}

// judgeNVLinks applies what hale knows of the instance type to a finding of NVLinks down. DCGM
// reports every link of a GPU without NVLink hardware as down (NVIDIA/DCGM#49, NVSentinel#1481,
// where it made every start a RESTART_VM), so its NVLink-down proves a fault only on a type
// known to have NVLinks; elsewhere it is an event.
func judgeNVLinks(f Finding, links int, known bool) Finding {
	switch {
	case f.Fault != "gpu.nvlink.down" || known && links > 0:
		return f
	case known:
		return toolEvent(f, "the instance type has no NVLinks, so DCGM's NVLink-down is a false positive")
	}
	return toolEvent(f, "without the instance type hale cannot tell a PCIe GPU, whose links DCGM reports down, from a broken NVLink")
}

// ---- dcgmi diag ----

var (
	// a section rule: "|-----  Deployment  --------+----...|", "+-----  Hardware  ---+---+"
	diagSectionRE = regexp.MustCompile(`^[|+]-{3,}\s+([A-Za-z][A-Za-z /]*?)\s+-+\+-+[|+]$`)
	// results: "Pass", "GPU0: Fail" (DCGM 4), "Fail - GPU: 0", "Pass - GPUs: 1, 2", "Fail - All" (DCGM 3)
	diagResultRE  = regexp.MustCompile(`^(Pass|Fail|Warn|Skip|Not Run)$`)
	diagEntityRE  = regexp.MustCompile(`^([A-Za-z_]+?) ?(\d+): (Pass|Fail|Warn|Skip|Not Run)$`)
	diagListRE    = regexp.MustCompile(`^(Pass|Fail|Warn|Skip|Not Run) - (All|GPUs?:? ?([\d, ]+))$`)
	diagMsgGPURE  = regexp.MustCompile(`^(?:Warning|Error|Info): ?GPU ?(\d+)$`)
	diagTextGPURE = regexp.MustCompile(`^GPU ?(\d+)\b`)
)

// diagKey is one test's result on one GPU (-1: every GPU the test ran on, or not said).
type diagKey struct {
	test string
	gpu  int
}

// diagMsg is a Warning or Error dcgmi printed for a test (Info lines say nothing of faults).
type diagMsg struct {
	test   string
	gpu    int
	chunks []string
	lines  []string // its rows, for evidence
}

// diagReader reads `dcgmi diag` output. A failed test proves a fault only by what its
// messages name: DCGM's codes for faulty memory, ECC errors, row remapping, NVLink or an Xid
// (dcgm table). A test that failed for want of resources, a CUDA context on a GPU busy with a
// job, or for configuration proves nothing about the hardware (NVIDIA/DCGM#145): that is
// dcgm.diag.fail, an event, to rerun on a drained node. A memory or ECC failure on a drained node
// names its cause, so it is not mistaken for the busy case.
type diagReader struct {
	c          *Catalog
	links      int
	linksKnown bool

	in      bool
	section string
	test    string
	results map[diagKey]string
	order   []diagKey
	msgs    []*diagMsg
	cur     *diagMsg
	lines   map[string][]string // each test's rows, for evidence
}

func (b *diagReader) line(raw string) ([]Finding, bool) {
	if b.in && isDcgmiTableLine(raw) {
		b.row(raw)
		return nil, true
	}
	var fs []Finding
	if b.in {
		fs = b.flush() // the output ended; the line may start the next one
	}
	t := strings.TrimSpace(raw)
	if t == "Successfully ran diagnostic for group." || diagSectionRE.MatchString(t) || isDiagHeader(t) || isDiagResultRow(t) {
		b.start()
		b.row(raw)
		return fs, true
	}
	return fs, false
}

// isDiagResultRow tells a test row only dcgmi diag prints, for an excerpt that starts without
// its header: "| GPU Memory | Pass - GPUs: 1, 2 |" (DCGM 3) or "|  | GPU0: Fail |" (DCGM 4).
func isDiagResultRow(t string) bool {
	_, value, ok := dcgmiCells(t)
	return ok && (diagListRE.MatchString(value) || diagEntityRE.MatchString(value))
}

func isDiagHeader(t string) bool {
	name, value, ok := dcgmiCells(t)
	return ok && name == "Diagnostic" && value == "Result"
}

func (b *diagReader) start() {
	*b = diagReader{c: b.c, links: b.links, linksKnown: b.linksKnown, in: true,
		results: map[diagKey]string{}, lines: map[string][]string{}}
}

func (b *diagReader) row(raw string) {
	t := strings.TrimSpace(raw)
	if m := diagSectionRE.FindStringSubmatch(t); m != nil {
		b.section, b.test, b.cur = m[1], "", nil
		return
	}
	name, value, ok := dcgmiCells(t)
	if !ok || b.section == "Metadata" || isDiagHeader(t) {
		return
	}
	if b.test != "" {
		b.lines[b.test] = append(b.lines[b.test], strings.TrimRight(raw, " "))
	}
	switch {
	case name == "":
		if b.result(value) {
			b.cur = nil
		} else if b.cur != nil {
			b.cur.chunks = append(b.cur.chunks, value)
			b.cur.lines = append(b.cur.lines, strings.TrimRight(raw, " "))
		}
	case strings.HasPrefix(name, "Warning") || strings.HasPrefix(name, "Error") || strings.HasPrefix(name, "Info"):
		b.cur = nil
		if strings.HasPrefix(name, "Info") {
			return
		}
		m := &diagMsg{test: b.test, gpu: -1, chunks: []string{value}, lines: []string{strings.TrimRight(raw, " ")}}
		if g := diagMsgGPURE.FindStringSubmatch(name); g != nil {
			m.gpu, _ = strconv.Atoi(g[1])
		} else if g := diagTextGPURE.FindStringSubmatch(value); g != nil {
			m.gpu, _ = strconv.Atoi(g[1])
		}
		b.msgs = append(b.msgs, m)
		b.cur = m
	default:
		b.test, b.cur = name, nil
		b.lines[name] = append(b.lines[name], strings.TrimRight(raw, " "))
		b.result(value)
	}
}

// result records a result cell of the current test; false when the cell is not one.
func (b *diagReader) result(v string) bool {
	set := func(gpu int, r string) {
		k := diagKey{b.test, gpu}
		if _, seen := b.results[k]; !seen {
			b.order = append(b.order, k)
		}
		b.results[k] = r
	}
	switch {
	case diagResultRE.MatchString(v):
		set(-1, v)
	case diagEntityRE.MatchString(v):
		m := diagEntityRE.FindStringSubmatch(v)
		if m[1] == "GPU" {
			n, _ := strconv.Atoi(m[2])
			set(n, m[3])
		}
	case diagListRE.MatchString(v):
		m := diagListRE.FindStringSubmatch(v)
		if m[2] == "All" {
			set(-1, m[1])
			break
		}
		for _, s := range strings.Split(m[3], ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
				set(n, m[1])
			}
		}
	default:
		return false
	}
	return true
}

func (b *diagReader) end() []Finding {
	if !b.in {
		return nil
	}
	return b.flush()
}

// flush gives the findings of the output read so far and waits for the next one.
func (b *diagReader) flush() []Finding {
	b.in = false
	named := map[*diagMsg]Finding{} // the most severe fault each message names
	for _, m := range b.msgs {
		if f, ok := b.c.dcgmTextFinding(diagText(m.chunks), strings.TrimSpace("dcgmi diag "+m.test)); ok {
			named[m] = judgeNVLinks(f, b.links, b.linksKnown)
		}
	}
	perGPU := map[string]bool{} // the tests DCGM gave results per GPU for (DCGM 4)
	for _, k := range b.order {
		if k.gpu >= 0 {
			perGPU[k.test] = true
		}
	}
	var out []Finding
	explained := map[*diagMsg]bool{}
	for _, k := range b.order {
		if b.results[k] != "Fail" || k.gpu < 0 && perGPU[k.test] {
			continue // a test's overall result repeats its GPUs' results
		}
		// "Fail - All": each GPU its messages name is a failure of its own
		gpus := []int{k.gpu}
		if k.gpu < 0 {
			gpus = b.messageGPUs(k.test)
		}
		for _, gpu := range gpus {
			if f, ok := b.judge(k.test, gpu, named, explained); ok {
				out = append(out, f)
			}
		}
	}
	// A message that names a fault where no failed result was printed (an excerpt, or an Error
	// row of a deployment check) still names it, unless the test passed on that GPU.
	for _, m := range b.msgs {
		g, ok := named[m]
		if !ok || explained[m] || g.Action == Ignore || b.passed(m) {
			continue
		}
		if g.GPU < 0 {
			g.GPU = m.gpu
		}
		g.Evidence, g.Lines = strings.Join(m.lines, "\n"), len(m.lines)
		out = append(out, g)
	}
	return out
}

// messageGPUs are the GPUs a failed test's messages name (-1 for messages that name none), or
// just -1 when it has no message.
func (b *diagReader) messageGPUs(test string) []int {
	var gpus []int
	seen := map[int]bool{}
	for _, m := range b.msgs {
		if m.test == test && !seen[m.gpu] {
			seen[m.gpu] = true
			gpus = append(gpus, m.gpu)
		}
	}
	if len(gpus) == 0 {
		gpus = []int{-1}
	}
	return gpus
}

// judge is the finding of a test that failed on a GPU (-1: on every GPU, or not said): the
// worst hardware fault its messages name, else dcgm.diag.fail, which proves nothing.
func (b *diagReader) judge(test string, gpu int, named map[*diagMsg]Finding, explained map[*diagMsg]bool) (Finding, bool) {
	var f Finding
	found := false
	var why []string
	for _, m := range b.msgs {
		if m.test != test || gpu >= 0 && m.gpu >= 0 && m.gpu != gpu || gpu < 0 && m.gpu >= 0 {
			continue
		}
		explained[m] = true
		if g, ok := named[m]; ok && g.Action != Ignore {
			f, found = worseFinding(f, found, g, true)
		}
		why = append(why, diagText(m.chunks))
	}
	if !found {
		e := b.c.toolFault("dcgm.diag.fail")
		if e == nil {
			return Finding{}, false
		}
		f = fromToolEntry(e, "dcgmi diag "+test)
		if len(why) > 0 {
			f.Meaning += " (" + strings.Join(why, "; ") + ")"
		}
	}
	if f.GPU < 0 {
		f.GPU = gpu
	}
	return b.evidence(f, test), true
}

// passed tells whether the test of a message passed (or only warned) on its GPU.
func (b *diagReader) passed(m *diagMsg) bool {
	for _, k := range []diagKey{{m.test, m.gpu}, {m.test, -1}} {
		if r, ok := b.results[k]; ok && r != "Fail" {
			return true
		}
	}
	return false
}

func (b *diagReader) evidence(f Finding, test string) Finding {
	lines := b.lines[test]
	f.Evidence, f.Lines = strings.Join(lines, "\n"), len(lines)
	return f
}

// diagText joins the pieces dcgmi cut a message into (45 characters each, cut anywhere).
func diagText(chunks []string) string { return strings.Join(chunks, " ") }

// ---- dcgmi health ----

// healthIncident is one health system's report for one entity.
type healthIncident struct {
	group  string
	entity int
	system string
	status string // Warning or Failure
	text   []string
	lines  []string
}

// healthReader reads `dcgmi health -c`: per entity ("-> 0" under "GPU"), per system ("-> PCIe
// system") a status and DCGM's messages. A Failure takes the fault its messages name (dcgm
// table), or dcgm.health when hale does not know the message; a Warning is an event, as the EKS
// agent and NVSentinel treat DCGM's WARN.
type healthReader struct {
	c          *Catalog
	links      int
	linksKnown bool

	in        bool
	group     string
	entity    int
	incidents []*healthIncident
	cur       *healthIncident
}

func (b *healthReader) line(raw string) ([]Finding, bool) {
	if !b.in {
		// The report's title row starts it; an excerpt without the title starts at its
		// first row, Overall Health.
		name, _, ok := dcgmiCells(raw)
		if !ok || name != "Health Monitor Report" && name != "Overall Health" {
			return nil, false
		}
		*b = healthReader{c: b.c, links: b.links, linksKnown: b.linksKnown, in: true, group: "GPU", entity: -1}
		return nil, true
	}
	if !isDcgmiTableLine(raw) {
		return b.flush(), false
	}
	name, value, ok := dcgmiCells(raw)
	if !ok {
		return nil, true // a rule
	}
	label := strings.TrimSpace(strings.TrimPrefix(name, "->"))
	switch {
	case name == "Overall Health":
	case name == "":
		if b.cur != nil && value != "" {
			b.cur.text = append(b.cur.text, value)
			b.cur.lines = append(b.cur.lines, strings.TrimRight(raw, " "))
		}
	case !strings.HasPrefix(name, "->"):
		b.group, b.entity, b.cur = label, -1, nil
	case dcgmiDigits(label):
		b.entity, _ = strconv.Atoi(label)
		b.cur = nil
	case strings.HasSuffix(label, "system"):
		b.cur = &healthIncident{group: b.group, entity: b.entity, system: label, status: value,
			lines: []string{strings.TrimRight(raw, " ")}}
		b.incidents = append(b.incidents, b.cur)
	default: // "-> Errors"
		b.cur = nil
	}
	return nil, true
}

func dcgmiDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func (b *healthReader) end() []Finding {
	if !b.in {
		return nil
	}
	return b.flush()
}

func (b *healthReader) flush() []Finding {
	b.in = false
	var out []Finding
	for _, in := range b.incidents {
		if in.status != "Warning" && in.status != "Failure" {
			continue
		}
		tool := "dcgmi health " + in.system
		text := strings.Join(in.text, " ")
		f, ok := b.c.dcgmTextFinding(text, tool)
		if !ok {
			f, ok = b.c.dcgmUnknownHealth(tool, text)
		}
		if !ok {
			continue
		}
		f = judgeNVLinks(f, b.links, b.linksKnown)
		if in.status == "Warning" {
			f = toolEvent(f, "DCGM: a warning")
		}
		if in.group == "GPU" {
			f.GPU = in.entity
		}
		f.Evidence, f.Lines = strings.Join(in.lines, "\n"), len(in.lines)
		out = append(out, f)
	}
	return out
}

// ---- dcgmi nvlink --link-status ----

// nvlinkReader reads `dcgmi nvlink -s`: a row of link states per GPU (U up, D down, X disabled,
// _ not supported). With the instance type known, a GPU with fewer links up than the type's
// GPUs have is a fault (gpu.nvlink.down), and a type without NVLinks has none. Without it, a
// GPU with links both up and down is a fault; a GPU whose every link is down proves nothing (a
// PCIe GPU may report its links so, NVIDIA/DCGM#198). NVSwitch rows are read but not judged: a
// switch has ports no GPU uses.
type nvlinkReader struct {
	c          *Catalog
	links      int
	linksKnown bool

	in       bool
	switches bool
	gpu      int
	states   map[int][]string
	lines    map[int][]string
	order    []int
}

var nvlinkGPURE = regexp.MustCompile(`^gpuId (\d+):$`)

func (b *nvlinkReader) line(raw string) ([]Finding, bool) {
	t := strings.TrimSpace(raw)
	if !b.in {
		if strings.Contains(t, "NvLink Link Status") {
			*b = nvlinkReader{c: b.c, links: b.links, linksKnown: b.linksKnown, in: true, gpu: -1,
				states: map[int][]string{}, lines: map[int][]string{}}
			return nil, true
		}
		return nil, false
	}
	switch {
	case t == "" || strings.HasPrefix(t, "+") || t == "GPUs:" || strings.HasPrefix(t, "No ") || strings.HasPrefix(t, "Link Entities:"):
	case t == "NvSwitches:":
		b.switches, b.gpu = true, -1
	case strings.HasPrefix(t, "physicalId "):
		b.gpu = -1
	case nvlinkGPURE.MatchString(t):
		m := nvlinkGPURE.FindStringSubmatch(t)
		b.gpu, _ = strconv.Atoi(m[1])
		if !b.switches {
			b.order = append(b.order, b.gpu)
			b.lines[b.gpu] = []string{raw}
		}
	case isLinkStates(t):
		if b.gpu >= 0 && !b.switches {
			b.states[b.gpu] = strings.Fields(t)
			b.lines[b.gpu] = append(b.lines[b.gpu], raw)
		}
	case strings.HasPrefix(t, "Key:"):
		return b.flush(), true
	default:
		return b.flush(), false
	}
	return nil, true
}

func isLinkStates(t string) bool {
	fs := strings.Fields(t)
	if len(fs) == 0 {
		return false
	}
	for _, f := range fs {
		if f != "U" && f != "D" && f != "X" && f != "_" {
			return false
		}
	}
	return true
}

func (b *nvlinkReader) end() []Finding {
	if !b.in {
		return nil
	}
	return b.flush()
}

func (b *nvlinkReader) flush() []Finding {
	b.in = false
	e := b.c.toolFault("gpu.nvlink.down")
	if e == nil {
		return nil
	}
	var out []Finding
	for _, gpu := range b.order {
		up, down, off := 0, 0, 0
		for _, s := range b.states[gpu] {
			switch s {
			case "U":
				up++
			case "D":
				down++
			case "X":
				off++
			}
		}
		var why string
		unsure := false
		switch {
		case b.linksKnown && b.links > 0 && up < b.links:
			why = fmt.Sprintf("GPU %d has %d NVLinks up, its instance type's GPUs have %d (dcgmi lists %d: %d down, %d disabled)", gpu, up, b.links, len(b.states[gpu]), down, off)
		case !b.linksKnown && down > 0 && up > 0:
			why = fmt.Sprintf("GPU %d has %d NVLinks down beside %d up", gpu, down, up)
		case !b.linksKnown && down > 0:
			// DCGM shows every link of a GPU without NVLink as Down: say what would tell.
			why = fmt.Sprintf("GPU %d shows all %d NVLinks down, as DCGM shows a GPU without NVLink; the instance type (--instance-type) tells which", gpu, down)
			unsure = true
		default:
			continue
		}
		f := fromToolEntry(e, "dcgmi nvlink --link-status")
		f.Meaning += ": " + why
		if unsure {
			f.Action = Ignore
		}
		f.GPU = gpu
		f.Evidence, f.Lines = strings.Join(b.lines[gpu], "\n"), len(b.lines[gpu])
		out = append(out, f)
	}
	return out
}
