package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkStream classifies the whole corpus (every real sample, kernel logs and tool
// outputs: mostly lines that are no fault, as on a node) through one Stream, as the agent's
// kernel-log monitor reads lines: the figure is the cost per line.
func BenchmarkStream(b *testing.B) {
	var lines []string
	for _, glob := range []string{"testdata/corpus/*.txt", "testdata/samples/*.txt"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			t, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			lines = append(lines, strings.Split(string(t), "\n")...)
		}
	}
	c := Default()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		s := c.NewStream(Options{})
		for _, l := range lines {
			n += len(s.Line(l))
		}
		n += len(s.End())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
	b.ReportMetric(float64(len(lines)), "lines")
}
