package health

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"time"
)

// Options say what a reader knows of the machine a text comes from.
type Options struct {
	// InstanceType (ml.p5.48xlarge, p5.48xlarge), when known: tool outputs are checked
	// against what the type should have, such as its NVLinks per GPU.
	InstanceType string
}

// blockReader reads one kind of multi-line tool output (nvidia-smi -q, dcgmi diag, ...) out
// of a text it sees line by line.
type blockReader interface {
	// line sees the next raw line. It returns the findings the block proves so far, and
	// whether the line belongs to the block (then it is not read again as a log line).
	line(raw string) (fs []Finding, consumed bool)
	// end is told the text ended; it returns what an unfinished block proves.
	end() []Finding
}

// A Stream classifies a log or a tool output line by line as it comes, the way the agent's
// kernel-log monitor reads it and `hale diagnose` reads a file. Unlike ClassifyLine it keeps
// what a message spread over several lines needs: the driver prints some NVRM messages over
// several lines ("The NVIDIA GPU 0000:b3:00.0 / (PCI ID: 10de:26b5) installed in this system
// has / fallen off the bus ..."), which reach hale as separate lines (dmesg, syslog), as
// one record with escaped newlines (/dev/kmsg "\x0a", rsyslog "#012") or with newlines
// inside (the journal's MESSAGE). A Stream is not safe for concurrent use.
type Stream struct {
	c      *Catalog
	blocks []blockReader
	nvrm   []nvrmPart // the recent NVRM lines, for messages that span several
}

type nvrmPart struct {
	rec  Record
	text string // without "NVRM:"
}

const (
	// joinLines is the most lines a multi-line NVRM message is looked for in.
	joinLines = 8
	// joinGap: lines further apart than this (by the times they carry) are not one message.
	joinGap = 2 * time.Second
)

// kmsgDictRE is a /dev/kmsg record's dictionary line (" SUBSYSTEM=pci").
var kmsgDictRE = regexp.MustCompile(`^ [A-Z_]+=`)

// newlineEscapes turns the ways logs escape a newline inside one message into newlines.
var newlineEscapes = strings.NewReplacer(`\x0a`, "\n", "#012", "\n", "\r\n", "\n")

// NewStream starts a stream.
func (c *Catalog) NewStream(opt Options) *Stream {
	return &Stream{c: c, blocks: append([]blockReader{&remapReader{c: c}, &hungTaskReader{c: c}}, c.toolBlocks(opt)...)}
}

// Line classifies the next line and returns the findings it completes: one per fault the line
// names (a record with several messages may name several), plus a multi-line message this
// line ends. Each finding has the line (or the message's lines) as its evidence.
func (s *Stream) Line(line string) []Finding {
	line = strings.TrimRight(line, "\r\n")
	if strings.Contains(line, "\n") { // a /dev/kmsg record: its message line, then " KEY=value" lines
		var out []Finding
		for _, l := range strings.Split(line, "\n") {
			if !kmsgDictRE.MatchString(l) {
				out = append(out, s.Line(l)...)
			}
		}
		return out
	}
	var out []Finding
	consumed := false
	for _, b := range s.blocks {
		fs, used := b.line(line)
		out = append(out, fs...)
		consumed = consumed || used
	}
	if consumed || strings.TrimSpace(line) == "" {
		return out
	}
	r := ParseLine(line)
	for _, part := range strings.Split(newlineEscapes.Replace(r.Message), "\n") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if f, ok := s.c.classifyMessage(part); ok {
			f.Evidence, f.Lines, f.Time, f.Uptime = line, 1, r.Time, r.Uptime
			out = append(out, f)
		}
		if f, ok := s.joined(r, part); ok {
			out = append(out, f)
		}
	}
	return out
}

// End tells the stream the text ended and returns what unfinished tool outputs prove.
func (s *Stream) End() []Finding {
	var out []Finding
	for _, b := range s.blocks {
		out = append(out, b.end()...)
	}
	return out
}

// joined keeps the recent lines of NVRM messages and matches the catalog's joined patterns
// against them: a finding when this line ends a message one of them describes.
func (s *Stream) joined(r Record, part string) (Finding, bool) {
	text, ok := strings.CutPrefix(part, "NVRM:")
	if !ok {
		return Finding{}, false
	}
	if n := len(s.nvrm); n > 0 && !oneMessage(s.nvrm[n-1].rec, r) {
		s.nvrm = nil
	}
	s.nvrm = append(s.nvrm, nvrmPart{rec: r, text: strings.TrimSpace(text)})
	if len(s.nvrm) > joinLines {
		s.nvrm = s.nvrm[1:]
	}
	texts := make([]string, len(s.nvrm))
	var evidence []string
	for i, p := range s.nvrm {
		texts[i] = p.text
		if raw := strings.TrimRight(p.rec.Raw, "\r\n"); len(evidence) == 0 || evidence[len(evidence)-1] != raw {
			evidence = append(evidence, raw)
		}
	}
	f, ok := s.c.patternFinding(strings.Join(texts, " "), true)
	if !ok {
		return Finding{}, false
	}
	first := s.nvrm[0].rec
	f.Evidence, f.Lines, f.Time, f.Uptime = strings.Join(evidence, "\n"), len(evidence), first.Time, first.Uptime
	s.nvrm = nil
	return f, true
}

// oneMessage says whether two lines can be parts of one message: the same host and times close
// together, where both lines say (dmesg's and journalctl's continuation lines say neither).
func oneMessage(a, b Record) bool {
	if a.Host != "" && b.Host != "" && a.Host != b.Host {
		return false
	}
	if !a.Time.IsZero() && !b.Time.IsZero() && absDuration(b.Time.Sub(a.Time)) > joinGap {
		return false
	}
	if a.Uptime > 0 && b.Uptime > 0 && absDuration(b.Uptime-a.Uptime) > joinGap {
		return false
	}
	return true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// ClassifyLines classifies a whole log or tool output and returns every finding, one per
// line (or multi-line message), in the order of the text.
func (c *Catalog) ClassifyLines(r io.Reader, opt Options) ([]Finding, error) {
	s := c.NewStream(opt)
	var out []Finding
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		out = append(out, s.Line(sc.Text())...)
	}
	return append(out, s.End()...), sc.Err()
}

// ClassifyText classifies a whole log or tool output and returns its episodes (Episodes): one
// finding per fault, however many lines the driver printed for it, in the order of the text.
func (c *Catalog) ClassifyText(r io.Reader) ([]Finding, error) {
	fs, err := c.ClassifyLines(r, Options{})
	return Episodes(fs, c.Policy.EpisodeWindow), err
}

// remapReader reads nvidia-smi -q's Remapped Rows block: "Pending : Yes" means a row remap
// waits for a GPU reset. The GPU is the one of the block's "GPU 00000000:07:00.0" heading.
type remapReader struct {
	c   *Catalog
	in  bool
	pci string
}

func (b *remapReader) line(raw string) ([]Finding, bool) {
	t := strings.TrimSpace(raw)
	switch {
	case strings.HasPrefix(raw, "GPU ") && strings.Count(t, ":") == 2 && !strings.Contains(t, " :"):
		b.pci = ShortPCI(strings.TrimPrefix(t, "GPU "))
	case t == "Remapped Rows":
		b.in = true
	case b.in && strings.HasPrefix(t, "Pending") && strings.HasSuffix(t, "Yes"):
		e := b.c.byFault["gpu.memory.remap_pending"]
		return []Finding{{Fault: e.Fault, Action: e.Action, GPU: -1, PCI: b.pci, Meaning: "nvidia-smi -q: " + e.Meaning,
			Source: e.Source, Evidence: raw, Lines: 1}}, true
	case b.in && !strings.Contains(t, ":"):
		b.in = false
	}
	return nil, false
}

func (b *remapReader) end() []Finding { return nil }
