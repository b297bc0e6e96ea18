// Command gen reads the SageMaker service model extract (api/model/sagemaker-cluster-shapes.json,
// a copy of ../shared/sagemaker-cluster-shapes.json) and writes package api's generated files:
// the wire types, their constraint checks, the runtime shape table and the operation table.
//
// Nothing about a shape is typed by hand: member names, Go types, JSON names, required members,
// lengths, patterns, enums, numeric ranges and list sizes all come from the model. Run it with
// `go generate ./api`.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

type model struct {
	Source     map[string]string     `json:"source"`
	Metadata   map[string]any        `json:"metadata"`
	Operations map[string]*operation `json:"operations"`
	Paginators map[string]*paginator `json:"paginators"`
	Shapes     map[string]*shape     `json:"shapes"`
}

type ref struct {
	Shape string `json:"shape"`
}

type operation struct {
	Name   string `json:"name"`
	Input  *ref   `json:"input"`
	Output *ref   `json:"output"`
	Errors []ref  `json:"errors"`
}

type paginator struct {
	InputToken  string `json:"input_token"`
	OutputToken string `json:"output_token"`
	LimitKey    string `json:"limit_key"`
	ResultKey   string `json:"result_key"`
}

type shape struct {
	Type      string          `json:"type"`
	Required  []string        `json:"required"`
	Members   map[string]*ref `json:"members"`
	Member    *ref            `json:"member"`
	Key       *ref            `json:"key"`
	Value     *ref            `json:"value"`
	Min       *int64          `json:"min"`
	Max       *int64          `json:"max"`
	Pattern   string          `json:"pattern"`
	Enum      []string        `json:"enum"`
	Union     bool            `json:"union"`
	Exception bool            `json:"exception"`

	name  string
	order []string // member names in model order
}

// UnmarshalJSON keeps the order of a structure's members, so generated types, docs and
// validation messages follow the model rather than the alphabet.
func (s *shape) UnmarshalJSON(b []byte) error {
	type plain shape
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	var raw struct {
		Members json.RawMessage `json:"members"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Members) == 0 {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Members))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		s.order = append(s.order, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// re2Equivalents holds the model's patterns that use Java regex features RE2 lacks, with an
// equivalent RE2 pattern (matched against the whole value). Each entry says why it is equal.
var re2Equivalents = map[string]string{
	// Negative lookahead "not only whitespace", then ".+" (no line terminators): a value without
	// newlines that holds at least one non-space character.
	`(?!\s*$).+`: `[^\n]*\S[^\n]*`,
}

func main() {
	modelPath := flag.String("model", "model/sagemaker-cluster-shapes.json", "service model extract")
	outDir := flag.String("out", ".", "directory of package api")
	flag.Parse()

	raw, err := os.ReadFile(*modelPath)
	if err != nil {
		log.Fatal(err)
	}
	var m model
	if err := json.Unmarshal(raw, &m); err != nil {
		log.Fatalf("%s: %v", *modelPath, err)
	}
	for n, s := range m.Shapes {
		s.name = n
	}
	g := &gen{m: &m, checks: map[string]bool{}}
	g.computeChecks()

	files := map[string]func() []byte{
		"types.gen.go":      g.types,
		"validate.gen.go":   g.validators,
		"schema.gen.go":     g.schema,
		"operations.gen.go": g.operations,
	}
	for name, fn := range files {
		src := fn()
		out, err := format.Source(src)
		if err != nil {
			os.WriteFile(filepath.Join(*outDir, name+".broken"), src, 0o644)
			log.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(*outDir, name), out, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

type gen struct {
	m      *model
	checks map[string]bool // shape name -> has constraint checks (directly or below)
}

func (g *gen) sortedShapes() []*shape {
	names := make([]string, 0, len(g.m.Shapes))
	for n := range g.m.Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*shape, len(names))
	for i, n := range names {
		out[i] = g.m.Shapes[n]
	}
	return out
}

func (g *gen) shape(name string) *shape {
	s, ok := g.m.Shapes[name]
	if !ok {
		log.Fatalf("unknown shape %q", name)
	}
	return s
}

func memberNames(s *shape) []string { return s.order }

func isRequired(s *shape, member string) bool {
	for _, r := range s.Required {
		if r == member {
			return true
		}
	}
	return false
}

// computeChecks marks every shape that carries a constraint itself or through its members.
func (g *gen) computeChecks() {
	var visit func(name string, seen map[string]bool) bool
	visit = func(name string, seen map[string]bool) bool {
		if v, ok := g.checks[name]; ok {
			return v
		}
		if seen[name] {
			return false
		}
		seen[name] = true
		s := g.shape(name)
		has := false
		switch s.Type {
		case "string":
			has = s.Min != nil || s.Max != nil || s.Pattern != "" || len(s.Enum) > 0
		case "integer", "float":
			has = s.Min != nil || s.Max != nil
		case "list":
			has = s.Min != nil || s.Max != nil
			if visit(s.Member.Shape, seen) {
				has = true
			}
		case "map":
			has = s.Min != nil || s.Max != nil
			if visit(s.Key.Shape, seen) || visit(s.Value.Shape, seen) {
				has = true
			}
		case "structure":
			has = len(s.Required) > 0 || s.Union
			for _, n := range memberNames(s) {
				if visit(s.Members[n].Shape, seen) {
					has = true
				}
			}
		}
		g.checks[name] = has
		return has
	}
	for _, s := range g.sortedShapes() {
		visit(s.name, map[string]bool{})
	}
}

// ---- naming ----

func exported(name string) string {
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// lowerCamel is how AWS names a member in a validation path ("instanceGroups.1.member.instanceCount").
func lowerCamel(name string) string {
	r := []rune(name)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]+`)

func enumConst(typeName, value string) string {
	var b strings.Builder
	b.WriteString(typeName)
	for _, p := range nonAlnum.Split(value, -1) {
		if p == "" {
			continue
		}
		if strings.ToUpper(p) == p {
			p = strings.ToLower(p)
		}
		b.WriteString(exported(p))
	}
	return b.String()
}

// goType is the Go type of a value of shape name, as a list element or map value (no pointer).
func (g *gen) goType(name string) string {
	s := g.shape(name)
	switch s.Type {
	case "string":
		if len(s.Enum) > 0 {
			return name
		}
		return "string"
	case "integer":
		return "int32"
	case "float":
		return "float32" // as the AWS SDKs hold the model's float
	case "boolean":
		return "bool"
	case "timestamp":
		return "Time"
	case "structure":
		return name
	case "list":
		return "[]" + g.goType(s.Member.Shape)
	case "map":
		return "map[" + g.goType(s.Key.Shape) + "]" + g.goType(s.Value.Shape)
	}
	log.Fatalf("shape %s: unsupported type %s", name, s.Type)
	return ""
}

// fieldType is the Go type of a structure member: scalars and structures are pointers so that an
// absent member (JSON null or missing) differs from a zero value.
func (g *gen) fieldType(name string) string {
	s := g.shape(name)
	switch s.Type {
	case "list", "map":
		return g.goType(name)
	}
	return "*" + g.goType(name)
}

func isScalar(t string) bool {
	switch t {
	case "string", "integer", "float", "boolean", "timestamp":
		return true
	}
	return false
}

// constraintDoc describes a shape's constraints in words, for the generated Go docs.
func (g *gen) constraintDoc(name string) string {
	s := g.shape(name)
	var parts []string
	unit := "length"
	if s.Type == "list" || s.Type == "map" {
		unit = "items"
	}
	number := s.Type == "integer" || s.Type == "float"
	switch {
	case number && s.Min != nil && s.Max != nil:
		parts = append(parts, fmt.Sprintf("range %d-%d", *s.Min, *s.Max))
	case number && s.Min != nil:
		parts = append(parts, fmt.Sprintf("minimum %d", *s.Min))
	case number && s.Max != nil:
		parts = append(parts, fmt.Sprintf("maximum %d", *s.Max))
	case s.Min != nil && s.Max != nil:
		parts = append(parts, fmt.Sprintf("%s %d-%d", unit, *s.Min, *s.Max))
	case s.Min != nil:
		parts = append(parts, fmt.Sprintf("%s at least %d", unit, *s.Min))
	case s.Max != nil:
		parts = append(parts, fmt.Sprintf("%s at most %d", unit, *s.Max))
	}
	if s.Pattern != "" {
		parts = append(parts, "pattern `"+s.Pattern+"`")
	}
	if len(s.Enum) > 0 && len(s.Enum) <= 12 {
		parts = append(parts, "one of "+strings.Join(s.Enum, ", "))
	} else if len(s.Enum) > 12 {
		parts = append(parts, fmt.Sprintf("one of %d values", len(s.Enum)))
	}
	return strings.Join(parts, "; ")
}

const header = "// Code generated by api/internal/gen from api/model/sagemaker-cluster-shapes.json. DO NOT EDIT.\n\n"

// ---- types.gen.go ----

func (g *gen) types() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package api\n\n")
	for _, s := range g.sortedShapes() {
		switch {
		case s.Type == "string" && len(s.Enum) > 0:
			g.enumType(&b, s)
		case s.Type == "structure":
			g.structType(&b, s)
		}
	}
	return b.Bytes()
}

func (g *gen) enumType(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "// %s is the SageMaker enum shape %s.\ntype %s string\n\n", s.name, s.name, s.name)
	fmt.Fprintf(b, "// Values of %s, as the model spells them.\nconst (\n", s.name)
	seen := map[string]string{}
	for _, v := range s.Enum {
		c := enumConst(s.name, v)
		if prev, dup := seen[c]; dup {
			log.Fatalf("enum %s: values %q and %q both map to %s", s.name, prev, v, c)
		}
		seen[c] = v
		fmt.Fprintf(b, "\t%s %s = %q\n", c, s.name, v)
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(b, "// Values returns every value of %s in model order.\nfunc (%s) Values() []%s {\n\treturn []%s{", s.name, s.name, s.name, s.name)
	for i, v := range s.Enum {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(enumConst(s.name, v))
	}
	b.WriteString("}\n}\n\n")
}

func (g *gen) structType(b *bytes.Buffer, s *shape) {
	kind := "structure"
	if s.Exception {
		kind = "exception structure"
	}
	fmt.Fprintf(b, "// %s is the SageMaker %s %s.", s.name, kind, s.name)
	if s.Union {
		b.WriteString(" It is a union: exactly one member is set.")
	}
	b.WriteString("\ntype " + s.name + " struct {\n")
	for _, mn := range memberNames(s) {
		ms := s.Members[mn].Shape
		doc := []string{}
		if isRequired(s, mn) {
			doc = append(doc, "Required.")
		}
		doc = append(doc, "Shape "+ms+".")
		if c := g.constraintDoc(ms); c != "" {
			doc = append(doc, "Constraints: "+c+".")
		}
		if g.shape(ms).Type == "timestamp" {
			doc = append(doc, "Epoch seconds on the wire.")
		}
		fmt.Fprintf(b, "\t// %s: %s\n", mn, strings.Join(doc, " "))
		// omitzero, not omitempty: an absent list is nil and left out, while an empty one the
		// service means to send ("Tags": []) stays on the wire.
		tag := mn + ",omitzero"
		mt := g.shape(ms).Type
		if isRequired(s, mn) && (mt == "list" || mt == "map") {
			tag = mn // required collections are always written, as [] or {}
		}
		fmt.Fprintf(b, "\t%s %s `json:%q`\n", mn, g.fieldType(ms), tag)
	}
	b.WriteString("}\n\n")
	for _, mn := range memberNames(s) {
		ms := s.Members[mn].Shape
		sh := g.shape(ms)
		if !isScalar(sh.Type) {
			continue
		}
		t := g.goType(ms)
		fmt.Fprintf(b, "// Get%s returns %s, or the zero value when it is absent.\n", mn, mn)
		fmt.Fprintf(b, "func (s *%s) Get%s() %s {\n\tif s == nil || s.%s == nil {\n\t\tvar zero %s\n\t\treturn zero\n\t}\n\treturn *s.%s\n}\n\n", s.name, mn, t, mn, t, mn)
	}
}

// ---- validate.gen.go ----

func (g *gen) validators() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package api\n\nimport \"regexp\"\n\n")

	// Compiled patterns, one per patterned shape.
	b.WriteString("// Patterns of the model's string shapes, anchored to match the whole value as the\n// service does (Java Matcher.matches).\nvar (\n")
	for _, s := range g.sortedShapes() {
		if s.Type != "string" || s.Pattern == "" {
			continue
		}
		p := s.Pattern
		if _, err := regexp.Compile(p); err != nil {
			eq, ok := re2Equivalents[p]
			if !ok {
				log.Fatalf("shape %s: pattern %q is not RE2 and has no equivalent: %v", s.name, p, err)
			}
			p = eq
		}
		fmt.Fprintf(&b, "\tpattern%s = regexp.MustCompile(%s)\n", s.name, strconv.Quote("^(?:"+p+")$"))
	}
	b.WriteString(")\n\n")

	for _, s := range g.sortedShapes() {
		if !g.checks[s.name] {
			continue
		}
		switch s.Type {
		case "string":
			g.checkString(&b, s)
		case "integer", "float":
			g.checkNumber(&b, s)
		case "list":
			g.checkList(&b, s)
		case "map":
			g.checkMap(&b, s)
		case "structure":
			g.checkStruct(&b, s)
		}
	}
	// Every structure gets an exported Validate, even those without constraints, so callers
	// (the server for inputs, tests for outputs) treat all shapes alike.
	for _, s := range g.sortedShapes() {
		if s.Type != "structure" {
			continue
		}
		fmt.Fprintf(&b, "// Validate checks s against the model's constraints for %s and returns a\n// ValidationException *Error listing every violation, or nil.\n", s.name)
		fmt.Fprintf(&b, "func (s *%s) Validate() error {\n", s.name)
		if g.checks[s.name] {
			b.WriteString("\tvar v validator\n\ts.validate(&v, \"\")\n\treturn v.err()\n}\n\n")
		} else {
			b.WriteString("\treturn nil\n}\n\n")
		}
	}
	return b.Bytes()
}

func (g *gen) checkString(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "func check%s(v *validator, path string, x string) {\n", s.name)
	if s.Min != nil {
		fmt.Fprintf(b, "\tv.minLen(path, x, %d)\n", *s.Min)
	}
	if s.Max != nil {
		fmt.Fprintf(b, "\tv.maxLen(path, x, %d)\n", *s.Max)
	}
	if s.Pattern != "" {
		fmt.Fprintf(b, "\tv.pattern(path, x, pattern%s, %s)\n", s.name, strconv.Quote(s.Pattern))
	}
	if len(s.Enum) > 0 {
		fmt.Fprintf(b, "\tv.enum(path, x, %s(\"\").Values())\n", s.name)
	}
	b.WriteString("}\n\n")
}

func (g *gen) checkNumber(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "func check%s(v *validator, path string, x %s) {\n", s.name, g.goType(s.name))
	if s.Min != nil {
		fmt.Fprintf(b, "\tminVal(v, path, x, %d)\n", *s.Min)
	}
	if s.Max != nil {
		fmt.Fprintf(b, "\tmaxVal(v, path, x, %d)\n", *s.Max)
	}
	b.WriteString("}\n\n")
}

// elemCheck writes the statement that checks one value of shape name held in expr (not a pointer).
func (g *gen) elemCheck(name, path, expr string) string {
	if !g.checks[name] {
		return ""
	}
	s := g.shape(name)
	switch s.Type {
	case "string":
		if len(s.Enum) > 0 {
			return fmt.Sprintf("check%s(v, %s, string(%s))", name, path, expr)
		}
		return fmt.Sprintf("check%s(v, %s, %s)", name, path, expr)
	case "integer", "float", "list", "map":
		return fmt.Sprintf("check%s(v, %s, %s)", name, path, expr)
	case "structure":
		return fmt.Sprintf("(&%s).validate(v, %s)", expr, path)
	}
	return ""
}

func (g *gen) checkList(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "func check%s(v *validator, path string, x %s) {\n", s.name, g.goType(s.name))
	if s.Min != nil {
		fmt.Fprintf(b, "\tv.minItems(path, x, len(x), %d)\n", *s.Min)
	}
	if s.Max != nil {
		fmt.Fprintf(b, "\tv.maxItems(path, x, len(x), %d)\n", *s.Max)
	}
	if c := g.elemCheck(s.Member.Shape, "listPath(path, i)", "x[i]"); c != "" {
		fmt.Fprintf(b, "\tfor i := range x {\n\t\t%s\n\t}\n", c)
	}
	b.WriteString("}\n\n")
}

func (g *gen) checkMap(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "func check%s(v *validator, path string, x %s) {\n", s.name, g.goType(s.name))
	if s.Min != nil {
		fmt.Fprintf(b, "\tv.minItems(path, x, len(x), %d)\n", *s.Min)
	}
	if s.Max != nil {
		fmt.Fprintf(b, "\tv.maxItems(path, x, len(x), %d)\n", *s.Max)
	}
	kc := g.elemCheck(s.Key.Shape, "mapKeyPath(path, string(k))", "k")
	vc := g.elemCheck(s.Value.Shape, "mapValuePath(path, string(k))", "val")
	if kc != "" || vc != "" {
		b.WriteString("\tfor k, val := range x {\n\t\t_ = val\n")
		if kc != "" {
			b.WriteString("\t\t" + kc + "\n")
		}
		if vc != "" {
			b.WriteString("\t\t" + vc + "\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n\n")
}

func (g *gen) checkStruct(b *bytes.Buffer, s *shape) {
	fmt.Fprintf(b, "func (s *%s) validate(v *validator, path string) {\n", s.name)
	if s.Union {
		b.WriteString("\tset := 0\n")
		for _, mn := range memberNames(s) {
			fmt.Fprintf(b, "\tif s.%s != nil {\n\t\tset++\n\t}\n", mn)
		}
		b.WriteString("\tv.union(path, set)\n")
	}
	for _, mn := range memberNames(s) {
		ms := s.Members[mn].Shape
		sh := g.shape(ms)
		mp := fmt.Sprintf("memberPath(path, %q)", lowerCamel(mn))
		req := isRequired(s, mn)
		var check string
		switch sh.Type {
		case "list", "map":
			check = g.elemCheck(ms, mp, "s."+mn)
		case "structure":
			check = g.elemCheck(ms, mp, "*s."+mn)
			if check != "" {
				check = fmt.Sprintf("s.%s.validate(v, %s)", mn, mp)
			}
		default:
			check = g.elemCheck(ms, mp, "*s."+mn)
		}
		switch {
		case req && check != "":
			fmt.Fprintf(b, "\tif s.%s == nil {\n\t\tv.null(%s)\n\t} else {\n\t\t%s\n\t}\n", mn, mp, check)
		case req:
			fmt.Fprintf(b, "\tif s.%s == nil {\n\t\tv.null(%s)\n\t}\n", mn, mp)
		case check != "":
			fmt.Fprintf(b, "\tif s.%s != nil {\n\t\t%s\n\t}\n", mn, check)
		}
	}
	b.WriteString("}\n\n")
}

// ---- schema.gen.go ----

func (g *gen) schema() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package api\n\n")
	b.WriteString("// Shapes is the model's shape table, keyed by shape name, for code that walks values by\n// shape at run time (the request decoder, the CLI).\nvar Shapes = map[string]*Shape{\n")
	kinds := map[string]string{
		"string": "KindString", "integer": "KindInteger", "float": "KindFloat", "boolean": "KindBoolean",
		"timestamp": "KindTimestamp", "structure": "KindStructure", "list": "KindList", "map": "KindMap",
	}
	for _, s := range g.sortedShapes() {
		fmt.Fprintf(&b, "\t%q: {Name: %q, Kind: %s", s.name, s.name, kinds[s.Type])
		if s.Type == "structure" {
			b.WriteString(", Members: []Member{")
			for _, mn := range memberNames(s) {
				fmt.Fprintf(&b, "{Name: %q, Shape: %q, Required: %v}, ", mn, s.Members[mn].Shape, isRequired(s, mn))
			}
			b.WriteString("}")
			if s.Union {
				b.WriteString(", Union: true")
			}
			if s.Exception {
				b.WriteString(", Exception: true")
			}
		}
		if s.Member != nil {
			fmt.Fprintf(&b, ", Elem: %q", s.Member.Shape)
		}
		if s.Key != nil {
			fmt.Fprintf(&b, ", Key: %q, Elem: %q", s.Key.Shape, s.Value.Shape)
		}
		if len(s.Enum) > 0 {
			fmt.Fprintf(&b, ", Enum: %#v", s.Enum)
		} else if c := g.constraintDoc(s.name); c != "" {
			fmt.Fprintf(&b, ", Constraints: %q", c)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// ---- operations.gen.go ----

func (g *gen) operations() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package api\n\nimport \"context\"\n\n")
	names := make([]string, 0, len(g.m.Operations))
	for n := range g.m.Operations {
		names = append(names, n)
	}
	sort.Strings(names)

	fmt.Fprintf(&b, "// Service protocol constants from the model's metadata.\nconst (\n")
	fmt.Fprintf(&b, "\tAPIVersion = %q\n\tTargetPrefix = %q\n\tSigningName = %q\n\tJSONVersion = %q\n)\n\n",
		g.m.Metadata["apiVersion"], g.m.Metadata["targetPrefix"], g.m.Metadata["signingName"], g.m.Metadata["jsonVersion"])

	// Error codes of the modelled exceptions.
	b.WriteString("// Codes of the exceptions the model declares.\nconst (\n")
	for _, s := range g.sortedShapes() {
		if s.Exception {
			fmt.Fprintf(&b, "\tCode%s = %q\n", s.name, s.name)
		}
	}
	b.WriteString(")\n\n")

	b.WriteString("// Service is every cluster operation of the model, one method each. A method returns its\n// output or an error; *Error values keep their code on the wire, anything else is an\n// InternalFailure.\ntype Service interface {\n")
	for _, n := range names {
		op := g.m.Operations[n]
		if op.Output != nil {
			fmt.Fprintf(&b, "\t%s(ctx context.Context, in *%s) (*%s, error)\n", n, op.Input.Shape, op.Output.Shape)
		} else {
			fmt.Fprintf(&b, "\t%s(ctx context.Context, in *%s) error\n", n, op.Input.Shape)
		}
	}
	b.WriteString("}\n\n")

	b.WriteString("// Operations lists every operation of the model, sorted by name.\nvar Operations = []*Operation{\n")
	for _, n := range names {
		op := g.m.Operations[n]
		out := ""
		if op.Output != nil {
			out = op.Output.Shape
		}
		errs := []string{}
		for _, e := range op.Errors {
			errs = append(errs, e.Shape)
		}
		fmt.Fprintf(&b, "\t{Name: %q, InputShape: %q, OutputShape: %q, Errors: %#v,\n", n, op.Input.Shape, out, errs)
		if p := g.m.Paginators[n]; p != nil {
			fmt.Fprintf(&b, "\t\tPaginator: &Paginator{InputToken: %q, OutputToken: %q, LimitKey: %q, ResultKey: %q},\n",
				p.InputToken, p.OutputToken, p.LimitKey, p.ResultKey)
		}
		fmt.Fprintf(&b, "\t\tNewInput: func() any { return new(%s) },\n", op.Input.Shape)
		if op.Output != nil {
			fmt.Fprintf(&b, "\t\tNewOutput: func() any { return new(%s) },\n", op.Output.Shape)
		}
		fmt.Fprintf(&b, "\t\tinvoke: func(ctx context.Context, svc Service, in any) (any, error) {\n")
		if op.Output != nil {
			fmt.Fprintf(&b, "\t\t\treturn svc.%s(ctx, in.(*%s))\n", n, op.Input.Shape)
		} else {
			fmt.Fprintf(&b, "\t\t\treturn struct{}{}, svc.%s(ctx, in.(*%s))\n", n, op.Input.Shape)
		}
		b.WriteString("\t\t}},\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}
