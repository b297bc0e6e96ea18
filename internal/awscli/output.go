package awscli

import (
	"os"
	"sort"
	"strings"
)

// printResult renders a response, or what --query made of it, in the chosen format: json as
// the AWS CLI prints it (4-space indent, the server's member order, nothing at all for an
// empty object), table and text as its formatters draw them.
func printResult(format, opName string, v any, termWidth int) string {
	switch format {
	case "table":
		return formatTable(opName, v, termWidth)
	case "text":
		var b strings.Builder
		formatText(&b, v, "", nil)
		return b.String()
	}
	if o, ok := v.(*object); ok && o.len() == 0 {
		return ""
	}
	var b strings.Builder
	writeJSON(&b, v, 0)
	b.WriteString("\n")
	return b.String()
}

// renderResponse prints the answer of a run: result, or for an automatically paginated run
// p, with q (nil without --query) applied first. As in the AWS CLI, json and table print the
// merged response and text prints page by page (see paged).
func renderResponse(format, opName string, q *query, result *object, p *paged, termWidth int) (string, error) {
	if p != nil && format == "text" {
		var b strings.Builder
		for _, page := range p.pages {
			v, err := q.apply(page)
			if err != nil {
				return "", err
			}
			formatText(&b, v, "", nil)
		}
		if p.resume != "" {
			tok := newObject()
			tok.set("NextToken", p.resume)
			doc := newObject()
			doc.set("NextToken", tok)
			v, err := q.apply(doc)
			if err != nil {
				return "", err
			}
			formatText(&b, v, "", nil)
		}
		return b.String(), nil
	}
	var v any = result
	if p != nil {
		v = p.merged
	}
	v, err := q.apply(v)
	if err != nil {
		return "", err
	}
	return printResult(format, opName, v, termWidth), nil
}

// formatText is a port of the AWS CLI's text output (awscli/text.py): one line per structure
// with its scalar values tab-separated in key order, prefixed by the upper-cased name of the
// member that holds it, and one line per scalar list element.
func formatText(b *strings.Builder, v any, identifier string, scalarKeys []string) {
	switch x := v.(type) {
	case *object:
		formatTextDict(b, x, identifier, scalarKeys)
	case []any:
		formatTextList(b, x, identifier)
	default:
		b.WriteString(pyStr(v) + "\n")
	}
}

func formatTextList(b *strings.Builder, l []any, identifier string) {
	if len(l) == 0 {
		return
	}
	hasDict, hasList := false, false
	for _, e := range l {
		switch e.(type) {
		case *object:
			hasDict = true
		case []any:
			hasList = true
		}
	}
	switch {
	case hasDict:
		keys := map[string]bool{}
		for _, e := range l {
			if o, ok := e.(*object); ok {
				for _, k := range o.keys {
					if isScalar(o.vals[k]) {
						keys[k] = true
					}
				}
			}
		}
		all := sortedSet(keys)
		for _, e := range l {
			formatText(b, e, identifier, all)
		}
	case hasList:
		var scalars []any
		for _, e := range l {
			if isScalar(e) {
				scalars = append(scalars, e)
			}
		}
		if len(scalars) > 0 {
			formatScalarList(b, scalars, identifier)
		}
		for _, e := range l {
			if !isScalar(e) {
				formatText(b, e, identifier, nil)
			}
		}
	default:
		formatScalarList(b, l, identifier)
	}
}

func formatScalarList(b *strings.Builder, l []any, identifier string) {
	if identifier != "" {
		for _, e := range l {
			b.WriteString(strings.ToUpper(identifier) + "\t" + pyStr(e) + "\n")
		}
		return
	}
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = pyStr(e)
	}
	b.WriteString(strings.Join(parts, "\t") + "\n")
}

func formatTextDict(b *strings.Builder, o *object, identifier string, scalarKeys []string) {
	var scalars []string
	type pair struct {
		key string
		val any
	}
	var nonScalars []pair
	if scalarKeys == nil {
		keys := append([]string{}, o.keys...)
		sort.Strings(keys)
		for _, k := range keys {
			if isScalar(o.vals[k]) {
				scalars = append(scalars, pyStr(o.vals[k]))
			} else {
				nonScalars = append(nonScalars, pair{k, o.vals[k]})
			}
		}
	} else {
		in := map[string]bool{}
		for _, k := range scalarKeys {
			in[k] = true
			if v, ok := o.get(k); ok {
				scalars = append(scalars, pyStr(v))
			} else {
				scalars = append(scalars, "")
			}
		}
		keys := append([]string{}, o.keys...)
		sort.Strings(keys)
		for _, k := range keys {
			if !in[k] {
				nonScalars = append(nonScalars, pair{k, o.vals[k]})
			}
		}
	}
	if len(scalars) > 0 {
		if identifier != "" {
			scalars = append([]string{strings.ToUpper(identifier)}, scalars...)
		}
		b.WriteString(strings.Join(scalars, "\t") + "\n")
	}
	for _, p := range nonScalars {
		formatText(b, p.val, p.key, nil)
	}
}

// terminalWidth is the width the table formatter fits to: the terminal's when out is one,
// else 80, as the AWS CLI falls back to.
func terminalWidth(out any) int {
	if f, ok := out.(*os.File); ok {
		if w := TerminalWidth(f); w > 0 {
			return w
		}
	}
	return 80
}
