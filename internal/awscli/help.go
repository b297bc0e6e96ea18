package awscli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/haleproject/hale/api"
)

// Help and skeletons are generated from the model at run time, laid out as `aws <service>
// <operation> help` lays them out. The model extract hale carries has no documentation strings
// and its shape table keeps only kinds, members, requiredness and enums, so the help shows those
// (constraints such as lengths and patterns are checked, and reported, by the server).

// typeName is the CLI's name for a shape's kind.
func typeName(s *api.Shape) string {
	switch s.Kind {
	case api.KindString:
		return "string"
	case api.KindInteger:
		return "integer"
	case api.KindFloat:
		return "float"
	case api.KindBoolean:
		return "boolean"
	case api.KindTimestamp:
		return "timestamp"
	case api.KindStructure:
		return "structure"
	case api.KindList:
		return "list"
	case api.KindMap:
		return "map"
	}
	return "unknown"
}

// operationHelp renders the manual page of op's command.
func operationHelp(op *api.Operation) string {
	name := kebab(op.Name)
	in := api.Shapes[op.InputShape]
	var b strings.Builder
	section := func(title string) { b.WriteString(title + "\n") }
	para := func(indent int, text string) {
		for _, line := range wrap(text, 79-indent) {
			b.WriteString(strings.Repeat(" ", indent) + line + "\n")
		}
		b.WriteString("\n")
	}

	section("NAME")
	para(7, name+" - SageMaker "+op.Name)

	section("DESCRIPTION")
	para(7, fmt.Sprintf("Calls the SageMaker %s operation on a hale server (input shape %s%s), as `aws sagemaker %s` does.", op.Name, op.InputShape, outputClause(op), name))
	if op.Paginator != nil {
		para(7, fmt.Sprintf("%s is a paginated operation. Multiple API calls may be issued in order to retrieve the entire data set of results. You can disable pagination by providing the --no-paginate argument, or by giving --%s or --%s yourself, which makes exactly one call.", name, kebab(op.Paginator.LimitKey), kebab(op.Paginator.InputToken)))
	}
	if len(op.Errors) > 0 {
		para(7, "Errors the model declares: "+strings.Join(op.Errors, ", ")+" (besides ValidationException and the common errors).")
	}

	section("SYNOPSIS")
	b.WriteString("            " + name + "\n")
	for _, m := range in.Members {
		flag := "--" + kebab(m.Name)
		s := api.Shapes[m.Shape]
		syn := flag + " <value>"
		if s.Kind == api.KindBoolean {
			syn = flag + " | --no-" + kebab(m.Name)
		}
		if !m.Required {
			syn = "[" + syn + "]"
		}
		b.WriteString("          " + syn + "\n")
	}
	globals := []string{"[--cli-input-json <value>]"}
	if op.Paginator != nil {
		globals = append(globals, "[--starting-token <value>]", "[--page-size <value>]", "[--max-items <value>]")
	}
	globals = append(globals, "[--generate-cli-skeleton <value>]", "[--debug]", "[--endpoint-url <value>]",
		"[--no-paginate]", "[--output <value>]", "[--query <value>]", "[--profile <value>]", "[--region <value>]")
	for _, g := range globals {
		b.WriteString("          " + g + "\n")
	}
	b.WriteString("\n")

	section("OPTIONS")
	for _, m := range in.Members {
		s := api.Shapes[m.Shape]
		head := "--" + kebab(m.Name)
		if s.Kind == api.KindBoolean {
			head += " | --no-" + kebab(m.Name)
		}
		head += " (" + typeName(s) + ")"
		if m.Required {
			head += " [required]"
		}
		b.WriteString("       " + head + "\n")
		b.WriteString(fmt.Sprintf("          Member %s, shape %s.\n", m.Name, s.Name))
		if s.Constraints != "" {
			b.WriteString("          Constraints: " + s.Constraints + ".\n")
		}
		if s.Kind == api.KindTimestamp {
			b.WriteString("          Epoch seconds (1412195400) or ISO 8601 (2014-10-01, 2014-10-01T20:30:00Z,\n          2014-10-01T12:30:00.000-08:00); sent as epoch seconds.\n")
		}
		if len(s.Enum) > 0 {
			b.WriteString("\n          Possible values:\n")
			for _, e := range s.Enum {
				b.WriteString("\n          o " + e + "\n")
			}
		}
		if isComplex(s) || s.Kind == api.KindList {
			b.WriteString("\n")
			if s.Kind == api.KindList {
				describeShape(&b, api.Shapes[s.Elem], 10, map[string]bool{})
			} else {
				describeMembers(&b, s, 10, map[string]bool{s.Name: true})
			}
			if sh := shorthandExample(s); sh != "" {
				b.WriteString("\n       Shorthand Syntax:\n\n          " + sh + "\n")
			}
			if s.Kind != api.KindList || isComplex(api.Shapes[s.Elem]) {
				b.WriteString("\n       JSON Syntax:\n\n")
				var js strings.Builder
				jsonSyntax(&js, s, 0, map[string]bool{})
				for _, line := range strings.Split(js.String(), "\n") {
					b.WriteString("          " + line + "\n")
				}
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(`       --cli-input-json (string) Performs the operation based on the JSON string
       provided (JSON text, or file://path). The JSON string follows the format provided by
       --generate-cli-skeleton. If other arguments are provided on the command line, the CLI
       values will override the JSON-provided values.

`)
	if op.Paginator != nil {
		b.WriteString(fmt.Sprintf(`       --starting-token (string) A token to specify where to start paginating. This is the
       NextToken from a previously truncated response.

       --page-size (integer) The size of each page to get in the service call (sent as %s).
       This does not affect the number of items returned in the command's output.

       --max-items (integer) The total number of items to return in the command's output. If
       the total number of items available is more than the value specified, a NextToken is
       provided in the command's output. To resume pagination, provide the NextToken value in
       the starting-token argument of a subsequent command.

`, op.Paginator.LimitKey))
	}
	b.WriteString(`       --generate-cli-skeleton (string) Prints a JSON skeleton to standard output without
       sending an API request. If provided with no value or the value input, prints a sample
       input JSON that can be used as an argument for --cli-input-json. If provided with the
       value output, it validates the command inputs and returns a sample output JSON for that
       command.

`)
	section("GLOBAL OPTIONS")
	b.WriteString(`       --debug (boolean)
          Print each request and response to standard error (the signature is redacted; the
          secret key is never sent).

       --endpoint-url (string)
          The hale server's URL. Default: AWS_ENDPOINT_URL_SAGEMAKER, AWS_ENDPOINT_URL, then the
          profile's endpoint_url (hale server writes it to DATA_DIR/config).

       --no-paginate (boolean)
          Disable automatic pagination: make one call, for the first page of results.

       --output (string)
          The formatting style for command output.

          o json

          o text

          o table

       --query (string)
          A JMESPath query to use in filtering the response data, applied before --output
          formats it (https://jmespath.org). Paginated operations: json and table apply it to
          the merged result, text to each page, as the AWS CLI does.

       --profile (string)
          Use a specific profile from your credential file. Default: AWS_PROFILE, else "hale"
          when a shared file (HALE_DATA_DIR's included) has it.

       --region (string)
          The region to sign requests for. Default: AWS_REGION, the profile's region, us-west-2.

`)
	section("OUTPUT")
	if op.OutputShape == "" {
		b.WriteString("       None\n")
	} else {
		describeMembers(&b, api.Shapes[op.OutputShape], 7, map[string]bool{op.OutputShape: true})
	}
	return b.String()
}

func outputClause(op *api.Operation) string {
	if op.OutputShape == "" {
		return ", no output"
	}
	return ", output shape " + op.OutputShape
}

// describeMembers lists a structure's members as "Name -> (type)" lines, nested shapes below.
func describeMembers(b *strings.Builder, s *api.Shape, indent int, seen map[string]bool) {
	pad := strings.Repeat(" ", indent)
	for _, m := range s.Members {
		ms := api.Shapes[m.Shape]
		line := pad + m.Name + " -> (" + typeName(ms) + ")"
		if m.Required {
			line += " [required]"
		}
		b.WriteString(line + "\n")
		if len(ms.Enum) > 0 {
			b.WriteString(pad + "   Possible values: " + strings.Join(ms.Enum, ", ") + "\n")
		} else if ms.Constraints != "" {
			b.WriteString(pad + "   Constraints: " + ms.Constraints + "\n")
		}
		switch ms.Kind {
		case api.KindStructure, api.KindList, api.KindMap:
			describeShape(b, ms, indent+3, seen)
		}
	}
}

// describeShape describes the inside of a structure, list or map, guarding against recursion.
func describeShape(b *strings.Builder, s *api.Shape, indent int, seen map[string]bool) {
	pad := strings.Repeat(" ", indent)
	switch s.Kind {
	case api.KindStructure:
		b.WriteString(pad + "(structure)\n")
		if seen[s.Name] {
			b.WriteString(pad + "   (recursive)\n")
			return
		}
		seen[s.Name] = true
		describeMembers(b, s, indent+3, seen)
		delete(seen, s.Name)
	case api.KindList:
		e := api.Shapes[s.Elem]
		if isComplex(e) {
			describeShape(b, e, indent, seen)
		} else {
			b.WriteString(pad + "(" + typeName(e) + ")\n")
			if len(e.Enum) > 0 {
				b.WriteString(pad + "   Possible values: " + strings.Join(e.Enum, ", ") + "\n")
			}
		}
	case api.KindMap:
		b.WriteString(pad + "key -> (" + typeName(api.Shapes[s.Key]) + ")\n")
		v := api.Shapes[s.Elem]
		b.WriteString(pad + "value -> (" + typeName(v) + ")\n")
		if isComplex(v) {
			describeShape(b, v, indent+3, seen)
		}
	}
}

// shorthandExample is the "Shorthand Syntax" line for shapes whose shorthand is simple: a flat
// structure, a list of them, a map of scalars, or a list of scalars.
func shorthandExample(s *api.Shape) string {
	flat := func(st *api.Shape) string {
		if st.Kind != api.KindStructure {
			return ""
		}
		parts := make([]string, 0, len(st.Members))
		for _, m := range st.Members {
			ms := api.Shapes[m.Shape]
			switch {
			case ms.Kind == api.KindList && !isComplex(api.Shapes[ms.Elem]):
				t := typeName(api.Shapes[ms.Elem])
				parts = append(parts, m.Name+"="+t+","+t)
			case isComplex(ms):
				return ""
			default:
				parts = append(parts, m.Name+"="+typeName(ms))
			}
		}
		return strings.Join(parts, ",")
	}
	switch s.Kind {
	case api.KindStructure:
		return flat(s)
	case api.KindList:
		e := api.Shapes[s.Elem]
		if !isComplex(e) {
			return typeName(e) + " " + typeName(e)
		}
		if f := flat(e); f != "" {
			return f + " ..."
		}
	case api.KindMap:
		if !isComplex(api.Shapes[s.Elem]) {
			return "KeyName1=" + typeName(api.Shapes[s.Elem]) + ",KeyName2=" + typeName(api.Shapes[s.Elem])
		}
	}
	return ""
}

// jsonSyntax writes the "JSON Syntax" block: the shape with type names in place of values.
func jsonSyntax(b *strings.Builder, s *api.Shape, indent int, seen map[string]bool) {
	pad := strings.Repeat("  ", indent)
	switch s.Kind {
	case api.KindStructure:
		if seen[s.Name] {
			b.WriteString("{ ... recursive ... }")
			return
		}
		seen[s.Name] = true
		defer delete(seen, s.Name)
		b.WriteString("{\n")
		for i, m := range s.Members {
			b.WriteString(pad + "  " + fmt.Sprintf("%q", m.Name) + ": ")
			jsonSyntax(b, api.Shapes[m.Shape], indent+1, seen)
			if i < len(s.Members)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(pad + "}")
	case api.KindList:
		b.WriteString("[\n" + pad + "  ")
		jsonSyntax(b, api.Shapes[s.Elem], indent+1, seen)
		b.WriteString("\n" + pad + "  ...\n" + pad + "]")
	case api.KindMap:
		b.WriteString("{" + fmt.Sprintf("%q", typeName(api.Shapes[s.Key])) + ": ")
		jsonSyntax(b, api.Shapes[s.Elem], indent+1, seen)
		b.WriteString("\n" + pad + "  ...\n" + pad + "}")
	case api.KindString:
		if len(s.Enum) > 0 {
			q := make([]string, len(s.Enum))
			for i, e := range s.Enum {
				q[i] = fmt.Sprintf("%q", e)
			}
			b.WriteString(strings.Join(q, "|"))
		} else {
			b.WriteString(`"string"`)
		}
	case api.KindBoolean:
		b.WriteString("true|false")
	default:
		b.WriteString(typeName(s))
	}
}

// skeleton builds the sample document of --generate-cli-skeleton as botocore's
// ArgumentGenerator does: every member, "" for strings (the first enum value, where botocore
// picks one at random), 0, true, the epoch as ISO 8601 text, one-element lists, and maps with a
// KeyName key. A structure met again inside itself is {}. For output skeletons (names true)
// strings hold the member's name instead, and list elements their shape's name, as the CLI's
// `--generate-cli-skeleton output` prints them.
func skeleton(s *api.Shape, stack map[string]int, names bool, name string) any {
	stack[s.Name]++
	defer func() { stack[s.Name]-- }()
	switch s.Kind {
	case api.KindStructure:
		o := newObject()
		if stack[s.Name] > 1 {
			return o
		}
		for _, m := range s.Members {
			o.set(m.Name, skeleton(api.Shapes[m.Shape], stack, names, m.Name))
		}
		return o
	case api.KindList:
		elemName := ""
		if names {
			elemName = s.Elem
		}
		return []any{skeleton(api.Shapes[s.Elem], stack, names, elemName)}
	case api.KindMap:
		o := newObject()
		o.set("KeyName", skeleton(api.Shapes[s.Elem], stack, names, ""))
		return o
	case api.KindString:
		if names {
			return name
		}
		if len(s.Enum) > 0 {
			return s.Enum[0]
		}
		return ""
	case api.KindInteger:
		return json.Number("0")
	case api.KindFloat:
		return json.Number("0.0")
	case api.KindBoolean:
		return true
	case api.KindTimestamp:
		return "1970-01-01T00:00:00"
	}
	return nil
}

// wrap breaks text into lines of at most width characters.
func wrap(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteString(" ")
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// operationSummary is the one-line description in `hale help`.
func operationSummary(op *api.Operation) string {
	var req []string
	for _, m := range api.Shapes[op.InputShape].Members {
		if m.Required {
			req = append(req, "--"+kebab(m.Name))
		}
	}
	s := "Call " + op.Name
	if len(req) > 0 {
		s += " (requires " + strings.Join(req, ", ") + ")"
	}
	if op.Paginator != nil {
		s += "; paginated"
	}
	return s
}
