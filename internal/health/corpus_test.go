package health

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// corpusSample is one real public input (testdata/corpus/corpus.yaml): where it comes from,
// the fault and node action its authority expects, and, for the few hale gets wrong on
// purpose or cannot yet get right, why.
type corpusSample struct {
	File      string `yaml:"file"`
	Source    string `yaml:"source"`
	Format    string `yaml:"format"`
	Class     string `yaml:"class"`
	Fault     string `yaml:"fault"`
	Action    Action `yaml:"action"`
	Authority string `yaml:"authority"`
	Notes     string `yaml:"notes"`
	// KnownMiss says why hale's answer differs from the expected one; the test then checks
	// that it still does (a fix must update the corpus), and the figures count it.
	KnownMiss string `yaml:"known_miss"`
}

// corpusResult is what hale decided about a sample: the worst decision over its episodes.
type corpusResult struct {
	sample corpusSample
	fault  string
	action Action
}

// judgeCorpus runs every sample of testdata/corpus and of testdata/samples (the research's
// failure samples) through hale's whole offline path: the stream, episodes and the policy.
func judgeCorpus(t *testing.T) []corpusResult {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var samples []corpusSample
	if err := yaml.Unmarshal(b, &samples); err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if s.Source == "" || s.Authority == "" || s.Action.Severity() < 0 || s.Fault == "" {
			t.Errorf("%s: a sample needs a source, an authority, a fault and an action", s.File)
		}
	}
	for _, fs := range failureSampleCases {
		samples = append(samples, corpusSample{File: "../samples/" + fs.id + ".txt", Class: "failure-samples", Fault: fs.fault, Action: fs.action.Effective(),
			Source: "research/failure-samples.md " + fs.id})
	}
	c := Default()
	var out []corpusResult
	for _, s := range samples {
		text, err := os.ReadFile(filepath.Join("testdata", "corpus", s.File))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := c.ClassifyLines(strings.NewReader(string(text)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		eps := Episodes(lines, c.Policy.EpisodeWindow)
		r := corpusResult{sample: s, fault: "none", action: Ignore}
		for i, d := range c.DecideEpisodes(eps) {
			// Judged as on a VM (the authorities' terms): a GPU reset counts as a reboot.
			if a := d.Action.Effective(); r.fault == "none" || a.Severity() > r.action.Severity() {
				r.fault, r.action = eps[i].Fault, a
			}
		}
		out = append(out, r)
	}
	return out
}

// TestCorpus: every real sample gets the node action its authority expects (a GPU reset is a
// reboot on a VM), and a fault of the expected type when it asks for an action. The figures
// in docs/health.md are these (HALE_UPDATE_DOCS=1 rewrites them).
func TestCorpus(t *testing.T) {
	results := judgeCorpus(t)
	for _, r := range results {
		s := r.sample
		ok := r.action == s.Action.Effective() && (s.Action.Effective() == Ignore || r.fault == s.Fault)
		switch {
		case s.KnownMiss == "" && !ok:
			t.Errorf("%s (%s): hale %s %s, want %s %s (%s)", s.File, s.Source, r.action, r.fault, s.Action, s.Fault, s.Authority)
		case s.KnownMiss != "" && ok:
			t.Errorf("%s: listed as a known miss (%s) but hale now gets it right: drop known_miss", s.File, s.KnownMiss)
		}
	}
	table := corpusTable(results)
	doc, err := os.ReadFile("../../docs/health.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- corpus:begin -->\n", "<!-- corpus:end -->"
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("docs/health.md has no %q ... %q section", begin, end)
	}
	if got := string(doc[i+len(begin) : j]); got != table {
		if os.Getenv("HALE_UPDATE_DOCS") == "1" {
			os.WriteFile("../../docs/health.md", []byte(string(doc[:i+len(begin)])+table+string(doc[j:])), 0o644)
			return
		}
		t.Errorf("docs/health.md's corpus figures are not hale's (HALE_UPDATE_DOCS=1 go test ./internal/health -run TestCorpus rewrites them):\n%s", table)
	}
}

// corpusTable is the precision and recall of each node action over the corpus, and the misses.
func corpusTable(rs []corpusResult) string {
	var b strings.Builder
	classes := map[string]bool{}
	for _, r := range rs {
		classes[r.sample.Class] = true
	}
	fmt.Fprintf(&b, "%d real samples (%d classes): %d in `internal/health/testdata/corpus`, %d failure samples of the research.\n\n",
		len(rs), len(classes), len(rs)-len(failureSampleCases), len(failureSampleCases))
	b.WriteString("| Node action | Expected | hale took it | Right | Precision | Recall |\n|---|---|---|---|---|---|\n")
	row := func(name string, want, got func(Action) bool) {
		var expected, taken, right int
		for _, r := range rs {
			e, g := want(r.sample.Action.Effective()), got(r.action)
			if e {
				expected++
			}
			if g {
				taken++
			}
			if e && g {
				right++
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s |\n", name, expected, taken, right, ratio(right, taken), ratio(right, expected))
	}
	is := func(a Action) func(Action) bool { return func(x Action) bool { return x == a } }
	acts := func(x Action) bool { return x != Ignore }
	row("Replace", is(Replace), is(Replace))
	row("Reboot", is(Reboot), is(Reboot))
	row("any node action", acts, acts)
	row("no action (Ignore)", is(Ignore), is(Ignore))
	var needless, missed, other []string
	for _, r := range rs {
		s := r.sample
		want := s.Action.Effective()
		line := fmt.Sprintf("`%s`: hale %s, expected %s", strings.TrimPrefix(s.File, "../samples/"), r.action, want)
		if s.KnownMiss != "" {
			line += " (" + s.KnownMiss + ")"
		}
		switch {
		case r.action == want:
		case want == Ignore:
			needless = append(needless, line)
		case r.action == Ignore:
			missed = append(missed, line)
		default:
			other = append(other, line)
		}
	}
	fmt.Fprintf(&b, "\nNeedless node actions: %d. Missed faults: %d. Wrong action for a real fault: %d.\n", len(needless), len(missed), len(other))
	for _, l := range append(append(needless, missed...), other...) {
		b.WriteString("- " + l + "\n")
	}
	return b.String()
}

func ratio(n, d int) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%d %%", (100*n+d/2)/d)
}
