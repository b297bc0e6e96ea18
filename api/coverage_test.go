package api

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The coverage table lists every operation of the model, names only members the model has and
// tests that exist in this module, and docs/api-coverage.md is what it renders (run with
// HALE_UPDATE_COVERAGE=1 to write the file again).
func TestCoverageOfTheModel(t *testing.T) {
	var ops []string
	for _, op := range Operations {
		ops = append(ops, op.Name)
		if _, ok := OperationCoverage[op.Name]; !ok {
			t.Errorf("operation %s has no behaviour in OperationCoverage", op.Name)
		}
	}
	for name := range OperationCoverage {
		if LookupOperation(name) == nil {
			t.Errorf("OperationCoverage has %s, which the model does not", name)
		}
	}
	for key := range MemberCoverage {
		shape, member, _ := strings.Cut(key, ".")
		s := Shapes[shape]
		if s == nil || !slices.ContainsFunc(s.Members, func(m Member) bool { return m.Name == member }) {
			t.Errorf("MemberCoverage has %s, which the model does not", key)
		}
	}
	// Every test named exists.
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, m := range funcs.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	for _, b := range all() {
		for _, name := range b.Tests {
			if !defined[name] {
				t.Errorf("the coverage names test %s, which does not exist", name)
			}
		}
		if b.Status != Works && b.Note == "" {
			t.Errorf("a behaviour %q without its reason: %+v", b.Status, b)
		}
	}
	slices.Sort(ops)
	doc := renderCoverage(ops)
	path := filepath.Join("..", "docs", "api-coverage.md")
	if os.Getenv("HALE_UPDATE_COVERAGE") != "" {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != doc {
		t.Errorf("%s is not what the coverage renders (HALE_UPDATE_COVERAGE=1 go test ./api -run TestCoverageOfTheModel writes it): %v", path, err)
	}
}

func all() []Behaviour {
	var out []Behaviour
	for _, b := range OperationCoverage {
		out = append(out, b)
	}
	for _, b := range MemberCoverage {
		out = append(out, b)
	}
	return out
}

// renderCoverage is docs/api-coverage.md: each operation, then each member of its input (and
// of an instance group's specification) with its behaviour.
func renderCoverage(ops []string) string {
	var b strings.Builder
	b.WriteString("# Coverage of the SageMaker cluster API\n\n")
	b.WriteString("Every operation of the model (`../shared/sagemaker-cluster-shapes.json`, `api/schema.gen.go`) and\n")
	b.WriteString("every member of its input, with hale's behaviour: **works** (as HyperPod documents it),\n")
	b.WriteString("**refused** (with HyperPod's error for the situation, and why), **kept** (accepted, stored and\n")
	b.WriteString("echoed; nothing on hale's machines acts on it, and why) or **not served** (a ValidationException\n")
	b.WriteString("naming the operation). Rendered from `api/coverage.go` by `TestCoverageOfTheModel`, which fails\n")
	b.WriteString("when the model has an operation the table lacks or a named test does not exist.\n\n")
	count := map[string]int{}
	b.WriteString("| Operation | Behaviour | Note | Tests |\n|---|---|---|---|\n")
	for _, name := range ops {
		c := OperationCoverage[name]
		count[c.Status]++
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, c.Status, c.Note, strings.Join(c.Tests, ", "))
	}
	fmt.Fprintf(&b, "\n%d operations: %d work, %d refused as HyperPod refuses, %d not served.\n", len(ops), count[Works], count[Refused], count[NotServed])
	b.WriteString("\n## Members\n\nA member not listed with its own behaviour works as its operation does.\n\n")
	b.WriteString("| Operation | Member | Behaviour | Note |\n|---|---|---|---|\n")
	for _, name := range ops {
		op := LookupOperation(name)
		for _, m := range Shapes[op.InputShape].Members {
			row(&b, name, op.InputShape, m.Name, OperationCoverage[name].Status)
			if m.Name == "InstanceGroups" && (name == "CreateCluster" || name == "UpdateCluster") {
				for _, gm := range Shapes["ClusterInstanceGroupSpecification"].Members {
					row(&b, name, "ClusterInstanceGroupSpecification", "InstanceGroups[]."+gm.Name, OperationCoverage[name].Status)
				}
			}
		}
	}
	return b.String()
}

func row(b *strings.Builder, op, shape, member, status string) {
	c, ok := MemberCoverage[shape+"."+strings.TrimPrefix(member, "InstanceGroups[].")]
	if !ok {
		c = Behaviour{Status: status}
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s |\n", op, member, c.Status, c.Note)
}
