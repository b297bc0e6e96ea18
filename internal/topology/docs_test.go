package topology

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsNameTheCatalog: docs/topology.md's table of which instance types get which topology
// says what the catalog says. The tree and block rows name every such type exactly; the flat row
// names the family (ml.<family>.<size>) of every type without topology. A type added to or
// moved in instance_types.json fails here until the table follows.
func TestDocsNameTheCatalog(t *testing.T) {
	b, err := os.ReadFile("../../docs/topology.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		for _, kind := range []string{"tree, 3 network-node layers", "tree, 4 network-node layers", "block", "flat"} {
			if strings.HasPrefix(line, "| "+kind) {
				rows[kind] = line
			}
		}
	}
	named := regexp.MustCompile("`(ml\\.[^`]+)`")
	listed := func(row string) []string {
		var out []string
		for _, m := range named.FindAllStringSubmatch(row, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{}
	var flat []string
	for _, name := range Names() {
		it, _ := Lookup(name)
		switch {
		case it.Topology == nil || it.Topology.NetworkNodeLayers == 0:
			flat = append(flat, name)
		case it.Topology.UltraServer != nil:
			want["block"] = append(want["block"], name)
		case it.Topology.NetworkNodeLayers == 4:
			want["tree, 4 network-node layers"] = append(want["tree, 4 network-node layers"], name)
		default:
			want["tree, 3 network-node layers"] = append(want["tree, 3 network-node layers"], name)
		}
	}
	for kind, names := range want {
		if got := listed(rows[kind]); !slices.Equal(got, names) {
			t.Errorf("docs/topology.md, row %q:\n got %v\nwant %v", kind, got, names)
		}
	}
	for _, name := range flat {
		family := strings.Split(name, ".")[1]
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(family) + `\b`).MatchString(rows["flat"]) {
			t.Errorf("docs/topology.md's flat row does not name %s's family %s", name, family)
		}
	}
}
