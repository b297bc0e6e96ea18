package awscli

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/haleproject/hale/api"
)

// Operation commands parse their own arguments (cobra's DisableFlagParsing): the AWS CLI's
// syntax, with list options that take several space-separated values (--node-ids a b c) and
// --no-x booleans, does not fit pflag. This file reads argv the way the CLI's argparse setup
// does; input.go turns the values into the JSON the model expects.

// opArgs is a command line parsed against one operation.
type opArgs struct {
	endpointURL, profile, region string
	output                       string
	query                        *string // --query, a JMESPath expression
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
	"query":                 '1',
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
	a := &opArgs{output: cmp.Or(os.Getenv("AWS_DEFAULT_OUTPUT"), "json")}
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
	case "query":
		a.query = &value
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
