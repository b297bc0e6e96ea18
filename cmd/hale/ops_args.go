package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/haleproject/hale/api"
)

// Operation commands parse their own arguments (cobra's DisableFlagParsing): the AWS CLI's
// syntax, with list options that take several space-separated values (--node-ids a b c) and
// --no-x booleans, does not fit pflag. This file reads argv the way the CLI's argparse setup
// does and turns each value into the JSON the model expects.

// opArgs is a command line parsed against one operation.
type opArgs struct {
	endpointURL, profile, region string
	output                       string
	cliInputJSON                 *string
	noPaginate, debug, help      bool
	skeleton                     string // "", "input" or "output"
	maxItems, pageSize           *int
	startingToken                *string
	members                      []memberArg // in command-line order
	paging                       []string    // the CLI paging options given, for --no-paginate errors
}

// memberArg is one top-level input member set by an option.
type memberArg struct {
	flag   string // --cluster-name
	member api.Member
	raw    []string // the values after the option
	bool   bool     // the value of a --x / --no-x boolean
}

// usageError is a command-line or parameter error: the AWS CLI exits 252 for these, before
// sending anything.
type usageError struct {
	msg    string
	syntax bool // an argument-syntax error, reported with the usage lines as argparse does
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func syntaxf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), syntax: true}
}

// paramError is the CLI's "Error parsing parameter '--x': ..." message.
func paramError(flag, format string, args ...any) error {
	return usagef("Error parsing parameter '%s': %s", flag, fmt.Sprintf(format, args...))
}

// optKind says what an option is and how many values it takes.
type optKind int

const (
	optGlobal optKind = iota
	optMember
	optMemberNo // --no-x for boolean member x
)

type optSpec struct {
	kind   optKind
	nargs  byte // '0' none, '1' one, '?' optional, '+' one or more
	member api.Member
}

// globalOptions are the options every operation command takes, with their arity.
var globalOptions = map[string]byte{
	"endpoint-url":          '1',
	"profile":               '1',
	"region":                '1',
	"output":                '1',
	"cli-input-json":        '1',
	"no-paginate":           '0',
	"generate-cli-skeleton": '?',
	"debug":                 '0',
	"no-cli-pager":          '0', // AWS CLI v2's option; hale never pages, so it is accepted and ignored
}

// pagingOptions are the AWS CLI's own pagination options, added to paginated operations.
var pagingOptions = map[string]byte{"starting-token": '1', "page-size": '1', "max-items": '1'}

// optionTable maps each option name (without --) of op to its spec.
func optionTable(op *api.Operation) map[string]optSpec {
	t := map[string]optSpec{}
	for name, n := range globalOptions {
		t[name] = optSpec{kind: optGlobal, nargs: n}
	}
	if op.Paginator != nil {
		for name, n := range pagingOptions {
			t[name] = optSpec{kind: optGlobal, nargs: n}
		}
	}
	for _, m := range api.Shapes[op.InputShape].Members {
		name := kebab(m.Name)
		switch api.Shapes[m.Shape].Kind {
		case api.KindBoolean:
			t[name] = optSpec{kind: optMember, nargs: '0', member: m}
			t["no-"+name] = optSpec{kind: optMemberNo, nargs: '0', member: m}
		case api.KindList:
			t[name] = optSpec{kind: optMember, nargs: '+', member: m}
		default:
			t[name] = optSpec{kind: optMember, nargs: '1', member: m}
		}
	}
	return t
}

var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

// looksLikeOption is argparse's test for a token that starts an option rather than being a
// value: it starts with '-' and is not a negative number.
func looksLikeOption(s string) bool {
	return len(s) > 1 && s[0] == '-' && !negativeNumber.MatchString(s)
}

// parseOpArgs reads args (everything after the command name) against op.
func parseOpArgs(op *api.Operation, args []string) (*opArgs, error) {
	table := optionTable(op)
	a := &opArgs{output: envOr("AWS_DEFAULT_OUTPUT", "json")}
	var unknown []string
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "-h" || tok == "--help" {
			a.help = true
			continue
		}
		if !looksLikeOption(tok) || !strings.HasPrefix(tok, "--") {
			if tok == "help" {
				a.help = true
			} else {
				unknown = append(unknown, tok)
			}
			continue
		}
		name, inline, hasInline := strings.Cut(tok[2:], "=")
		spec, ok := table[name]
		if !ok {
			unknown = append(unknown, tok)
			continue
		}
		var values []string
		switch spec.nargs {
		case '0':
			if hasInline {
				return nil, syntaxf("argument --%s: ignored explicit argument '%s'", name, inline)
			}
		case '1':
			switch {
			case hasInline:
				values = []string{inline}
			case i+1 < len(args) && !looksLikeOption(args[i+1]):
				i++
				values = []string{args[i]}
			default:
				return nil, syntaxf("argument --%s: expected one argument", name)
			}
		case '?':
			if hasInline {
				values = []string{inline}
			} else if i+1 < len(args) && !looksLikeOption(args[i+1]) && args[i+1] != "help" {
				i++
				values = []string{args[i]}
			}
		case '+':
			if hasInline {
				values = []string{inline}
			}
			for i+1 < len(args) && !looksLikeOption(args[i+1]) {
				i++
				values = append(values, args[i])
			}
			if len(values) == 0 {
				return nil, syntaxf("argument --%s: expected at least one argument", name)
			}
		}
		if err := a.set(name, spec, values); err != nil {
			return nil, err
		}
	}
	if len(unknown) > 0 && !a.help {
		return nil, syntaxf("Unknown options: %s", strings.Join(unknown, ", "))
	}
	return a, nil
}

// set records one parsed option.
func (a *opArgs) set(name string, spec optSpec, values []string) error {
	switch spec.kind {
	case optMember:
		a.members = append(a.members, memberArg{flag: "--" + name, member: spec.member, raw: values, bool: true})
		return nil
	case optMemberNo:
		a.members = append(a.members, memberArg{flag: "--" + name, member: spec.member, bool: false})
		return nil
	}
	value := ""
	if len(values) > 0 {
		value = values[0]
	}
	switch name {
	case "endpoint-url":
		a.endpointURL = value
	case "profile":
		a.profile = value
	case "region":
		a.region = value
	case "output":
		switch value {
		case "json", "text", "table":
			a.output = value
		default:
			return syntaxf("argument --output: Invalid choice '%s', valid choices are: json | text | table", value)
		}
	case "cli-input-json":
		a.cliInputJSON = &value
	case "no-paginate":
		a.noPaginate = true
	case "debug":
		a.debug = true
	case "generate-cli-skeleton":
		switch value {
		case "":
			a.skeleton = "input"
		case "input", "output":
			a.skeleton = value
		default:
			return syntaxf("argument --generate-cli-skeleton: Invalid choice '%s', valid choices are: input | output", value)
		}
	case "starting-token":
		a.startingToken = &value
		a.paging = append(a.paging, "--"+name)
	case "max-items", "page-size":
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			return syntaxf("argument --%s: invalid int value: '%s'", name, value)
		}
		if name == "max-items" {
			a.maxItems = &n
		} else {
			a.pageSize = &n
		}
		a.paging = append(a.paging, "--"+name)
	}
	return nil
}

// buildInput assembles the operation's input: the --cli-input-json document, with the members
// given as options replacing or adding to its members, as the AWS CLI merges them.
func (a *opArgs) buildInput(op *api.Operation) (*object, error) {
	in := newObject()
	if a.cliInputJSON != nil {
		text, source, err := readParamFile("cli-input-json", *a.cliInputJSON)
		if err != nil {
			return nil, err
		}
		v, err := parseJSON([]byte(text))
		if err != nil {
			return nil, invalidJSON("cli-input-json", source, text, err)
		}
		o, ok := v.(*object)
		if !ok {
			return nil, paramError("cli-input-json", "Invalid JSON received%s: the document must be a JSON object of %s members, not %s", from(source), op.InputShape, jsonKindName(v))
		}
		in = o
	}
	for _, m := range a.members {
		v, err := unpackMember(m)
		if err != nil {
			return nil, err
		}
		in.set(m.member.Name, v)
	}
	return in, nil
}

func from(source string) string {
	if source == "" {
		return ""
	}
	return " from " + source
}

// invalidJSON is the message for a value that is not JSON: the option, the file it came from
// and where the parser stopped; inline JSON is echoed back as the AWS CLI does.
func invalidJSON(flag, source, text string, err error) error {
	if source != "" {
		return paramError(flag, "Invalid JSON received from %s: %v", source, err)
	}
	return paramError(flag, "Invalid JSON received: %v\nJSON received: %s", err, text)
}

// readParamFile resolves the CLI's file:// and fileb:// prefixes; source names the file.
func readParamFile(flag, value string) (text, source string, err error) {
	for _, prefix := range []string{"file://", "fileb://"} {
		if strings.HasPrefix(value, prefix) {
			path := expandHome(strings.TrimPrefix(value, prefix))
			b, err := os.ReadFile(path)
			if err != nil {
				return "", "", paramError(flag, "Unable to load paramfile %s: %v", value, err)
			}
			return string(b), value, nil
		}
	}
	return value, "", nil
}

func expandHome(path string) string {
	path = os.ExpandEnv(path)
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, path[2:])
		}
	}
	return path
}

// unpackMember turns an option's values into the member's JSON value.
func unpackMember(m memberArg) (any, error) {
	shape := api.Shapes[m.member.Shape]
	if shape.Kind == api.KindBoolean {
		return m.bool, nil
	}
	raw := m.raw
	source := ""
	if len(raw) == 1 {
		text, src, err := readParamFile(m.flag, raw[0])
		if err != nil {
			return nil, err
		}
		raw, source = []string{text}, src
	}
	switch shape.Kind {
	case api.KindList:
		elem := api.Shapes[shape.Elem]
		if len(raw) == 1 && strings.HasPrefix(strings.TrimSpace(raw[0]), "[") {
			return parseMemberJSON(m.flag, source, raw[0])
		}
		out := make([]any, 0, len(raw))
		if isComplex(elem) {
			if strings.HasPrefix(strings.TrimSpace(raw[0]), "{") {
				for _, r := range raw {
					v, err := parseMemberJSON(m.flag, source, r)
					if err != nil {
						return nil, err
					}
					out = append(out, v)
				}
				return out, nil
			}
			for _, r := range raw {
				v, err := parseShorthandFor(m.flag, r, elem)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}
		for _, r := range raw {
			v, err := unpackScalar(m.flag, elem, r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case api.KindStructure, api.KindMap:
		if strings.HasPrefix(strings.TrimSpace(raw[0]), "{") {
			return parseMemberJSON(m.flag, source, raw[0])
		}
		if shape.Kind == api.KindStructure && len(shape.Members) == 1 && shape.Members[0].Name == "Value" &&
			api.Shapes[shape.Members[0].Shape].Kind == api.KindString && !strings.Contains(raw[0], "=") {
			o := newObject()
			o.set("Value", raw[0])
			return o, nil
		}
		return parseShorthandFor(m.flag, raw[0], shape)
	}
	return unpackScalar(m.flag, shape, raw[0])
}

func isComplex(s *api.Shape) bool {
	return s.Kind == api.KindStructure || s.Kind == api.KindList || s.Kind == api.KindMap
}

func parseMemberJSON(flag, source, text string) (any, error) {
	v, err := parseJSON([]byte(text))
	if err != nil {
		return nil, invalidJSON(flag, source, text, err)
	}
	return v, nil
}

// parseShorthandFor parses one shorthand value and applies shape to it.
func parseShorthandFor(flag, text string, shape *api.Shape) (any, error) {
	v, err := parseShorthand(text)
	if err != nil {
		return nil, paramError(flag, "%v", err)
	}
	out, err := applyShape(v, shape)
	if err != nil {
		return nil, paramError(flag, "%v", err)
	}
	return out, nil
}

// applyShape converts the strings of a shorthand value to the model's types (integers,
// booleans) and wraps a single value where the model has a list, as the CLI's
// BackCompatVisitor does.
func applyShape(v any, s *api.Shape) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch s.Kind {
	case api.KindStructure:
		o, ok := v.(*object)
		if !ok {
			return v, nil
		}
		for _, m := range s.Members {
			if mv, ok := o.get(m.Name); ok {
				nv, err := applyShape(mv, api.Shapes[m.Shape])
				if err != nil {
					return nil, err
				}
				o.set(m.Name, nv)
			}
		}
		return o, nil
	case api.KindList:
		l, ok := v.([]any)
		if !ok {
			l = []any{v}
		}
		for i, e := range l {
			ne, err := applyShape(e, api.Shapes[s.Elem])
			if err != nil {
				return nil, err
			}
			l[i] = ne
		}
		return l, nil
	case api.KindMap:
		o, ok := v.(*object)
		if !ok {
			return v, nil
		}
		for _, k := range o.keys {
			nv, err := applyShape(o.vals[k], api.Shapes[s.Elem])
			if err != nil {
				return nil, err
			}
			o.set(k, nv)
		}
		return o, nil
	case api.KindInteger:
		if str, ok := v.(string); ok {
			return parseInt(str)
		}
	case api.KindBoolean:
		if str, ok := v.(string); ok {
			switch strings.ToLower(str) {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
	}
	return v, nil
}

// unpackScalar converts an option value to a scalar member's type. Timestamps stay text here
// and are turned into epoch seconds with the rest of the input (normalizeInput).
func unpackScalar(flag string, s *api.Shape, value string) (any, error) {
	switch s.Kind {
	case api.KindInteger:
		n, err := parseInt(value)
		if err != nil {
			return nil, paramError(flag, "%v", err)
		}
		return n, nil
	case api.KindBoolean:
		return !strings.EqualFold(value, "false") && value != "", nil
	}
	return value, nil
}

// parseInt reads an integer as Python's int() does, for the same error text.
func parseInt(s string) (json.Number, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return "", fmt.Errorf("invalid literal for int() with base 10: '%s'", s)
	}
	return json.Number(strconv.FormatInt(n, 10)), nil
}

func jsonKindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	}
	return "an object"
}
