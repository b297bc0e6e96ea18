package awscli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
)

// TestQueryMatchesTheAWSCLI prints each case of testdata/output/query/cases.tsv in the three
// formats and compares the bytes with what the AWS CLI's own formatters, botocore's paginator
// and jmespath.py print for it (NAME.golden, made by golden.py there): scalars, numbers, a
// member that is not there, list and hash projections, filters, functions, and paginated
// responses with --max-items and --starting-token, where text applies the query page by page.
func TestQueryMatchesTheAWSCLI(t *testing.T) {
	const dir = "testdata/output/query/"
	cases, err := os.ReadFile(dir + "cases.tsv")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(cases), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 6)
		if len(f) != 6 {
			t.Fatalf("cases.tsv: %q has %d fields", line, len(f))
		}
		name, path, opName, maxItems, startingToken, expr := f[0], f[1], f[2], f[3], f[4], f[5]
		n++
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(dir + name + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			var q *query
			if expr != "-" {
				if q, err = compileQuery(expr); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(dir + path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := parseJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, format := range []string{"json", "text", "table"} {
				var result *object
				var p *paged
				if strings.HasSuffix(path, ".pages.json") {
					p = servePages(t, opName, doc.([]any), maxItems, startingToken)
				} else {
					result = doc.(*object)
				}
				out, err := renderResponse(format, opName, q, result, p, 80)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString("--- " + format + "\n" + out)
			}
			if got.String() != string(want) {
				t.Errorf("--query %s differs from the AWS CLI's:\n%s\nwant:\n%s", expr, got.String(), want)
			}
		})
	}
	if n < 10 {
		t.Fatalf("cases.tsv has %d cases", n)
	}
}

// servePages runs paginate over pages, served by their NextToken as golden.py serves them.
func servePages(t *testing.T, opName string, pages []any, maxItems, startingToken string) *paged {
	t.Helper()
	byToken := map[string]*object{"": pages[0].(*object)}
	for i, p := range pages {
		if tok, ok := p.(*object).get("NextToken"); ok {
			byToken[tok.(string)] = pages[i+1].(*object)
		}
	}
	var o pageOpts
	if maxItems != "-" {
		n, err := strconv.Atoi(maxItems)
		if err != nil {
			t.Fatal(err)
		}
		o.maxItems = &n
	}
	if startingToken != "-" {
		o.startingToken = &startingToken
	}
	op := api.LookupOperation(opName)
	p, err := paginate(op, newObject(), o, func(in *object) (*object, error) {
		tok, _ := in.get("NextToken")
		s, _ := tok.(string)
		page, ok := byToken[s]
		if !ok {
			t.Fatalf("no page for token %q", s)
		}
		return page, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQueryErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"A[}", "Bad value for --query A[}: Expected star, received: rbrace: Parse error at column 2, for expression:\n\"A[}\"\n   ^"},
		{"ClusterStatus ||", "Bad value for --query ClusterStatus ||: "},
		{"foo-bar", "Bad value for --query foo-bar: "},
		{"a\u0080", "Bad value for --query a\u0080: "}, // panics inside go-jmespath's lexer
	} {
		_, err := compileQuery(tc.expr)
		u, ok := err.(*usageError)
		if !ok || !strings.HasPrefix(u.msg, tc.want) {
			t.Errorf("compileQuery(%q): %v, want a usage error starting %q", tc.expr, err, tc.want)
		}
	}
	// Errors the expression raises on the data are not usage errors: they come after the call.
	q, err := compileQuery("length(ClusterStatus.Nope) || abs(ClusterStatus)")
	if err != nil {
		t.Fatal(err)
	}
	doc := newObject()
	doc.set("ClusterStatus", "InService")
	if _, err := q.search(doc); err == nil || !strings.Contains(err.Error(), "Bad value for --query length(") {
		t.Errorf("abs(string): %v", err)
	}
	if q, _ := compileQuery("nosuchfunction(@)"); q == nil {
		t.Fatal("an unknown function is found when it is called, as in jmespath.py")
	} else if _, err := q.search(doc); err == nil || !strings.Contains(err.Error(), "unknown function") {
		t.Errorf("unknown function: %v", err)
	}
}

func TestHashKeyOrder(t *testing.T) {
	got := hashKeyOrder("a[?b=='{x: 1}'].{Name: n, \"Other key\": `{\"z\": 1}`, nested: {Inner: m, Name: k}} | [0].{Zed: z}")
	want := []string{"Name", "Other key", "nested", "Inner", "Zed"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i, k := range want {
		if got[k] != i {
			t.Errorf("%s at %d, want %d (%v)", k, got[k], i, got)
		}
	}
}

func TestPyNumber(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 3: "3", -7: "-7", 1796002090.68: "1796002090.68", 1796002081.655: "1796002081.655",
		0.5: "0.5", 0.0001: "0.0001", 0.00001: "1e-05", 1.5e-7: "1.5e-07", 1e16: "1e+16", 2.5e20: "2.5e+20",
	} {
		if got := pyNumber(f); got != want {
			t.Errorf("pyNumber(%v) = %s, want %s", f, got, want)
		}
	}
}

// The AWS CLI (jmespath.py) still reads a backtick literal that is not JSON as a string, and
// AWS's examples use it: InstanceGroups[?InstanceGroupName==`gpu`].
func TestQueryLegacyLiterals(t *testing.T) {
	for in, want := range map[string]string{
		"a[?n==`gpu`].c":     "a[?n==`\"gpu\"`].c",
		"a[?n==`  gpu`]":     "a[?n==`\"gpu\"`]",
		"a[?n==`\"gpu\"`]":   "a[?n==`\"gpu\"`]",
		"a[?n==`1`]":         "a[?n==`1`]",
		"a[?n==`[1, 2]`]":    "a[?n==`[1, 2]`]",
		"a[?n=='raw `x` y']": "a[?n=='raw `x` y']",
		"\"quoted `x`\".b":   "\"quoted `x`\".b",
		"a[?n==`a\\`b`]":     "a[?n==`\"a\\`b\"`]",
		"a[?n==`foo bar`].c": "a[?n==`\"foo bar\"`].c",
		"a[?n==`unclosed":    "a[?n==`unclosed",
	} {
		if got := legacyLiterals(in); got != want {
			t.Errorf("legacyLiterals(%q) = %q, want %q", in, got, want)
		}
	}
	q, err := compileQuery("[ClusterStatus, InstanceGroups[?InstanceGroupName==`gpu`].CurrentCount]")
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.search(map[string]any{"ClusterStatus": "InService", "InstanceGroups": []any{
		map[string]any{"InstanceGroupName": "cpu", "CurrentCount": 1.0},
		map[string]any{"InstanceGroupName": "gpu", "CurrentCount": 2.0}}})
	if err != nil || fmt.Sprint(got) != "[InService [2]]" {
		t.Errorf("search = %v, %v; want [InService [2]]", got, err)
	}
}
