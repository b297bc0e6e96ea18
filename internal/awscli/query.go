package awscli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jmespath/go-jmespath"
)

// --query filters a response with a JMESPath expression before --output formats it, as the AWS
// CLI's --query does. go-jmespath implements the JMESPath specification that the AWS CLI's
// jmespath.py implements (same grammar, same functions, same compliance suite), so an
// expression means the same thing to both. It works on map[string]any, []any and float64, so
// a response is converted for the search and the result converted back; objects the search
// returns unchanged keep the server's member order, and objects it builds ({Name: x, ...})
// take the order the expression writes their keys in, as the CLI's dicts do.
//
// Known differences, all from Go maps having no order: `*` on an object, keys() and values()
// list members in an unspecified order where the CLI keeps the server's.

// query is a compiled --query expression.
type query struct {
	expr     string
	compiled *jmespath.JMESPath
	keyOrder map[string]int // multi-select hash keys, by their first position in expr
}

// compileQuery parses expr; a syntax error is a parameter error (exit 252, nothing sent), with
// the message laid out as jmespath.py's: what was expected, the column, the expression and a
// caret under the column.
func compileQuery(expr string) (q *query, err error) {
	defer func() {
		// go-jmespath's lexer can panic on some input (an identifier followed by U+0080); a
		// typed expression must not crash the CLI.
		if r := recover(); r != nil {
			q, err = nil, usagef("Bad value for --query %s: invalid expression (%v)", expr, r)
		}
	}()
	c, err := jmespath.Compile(legacyLiterals(expr))
	if err != nil {
		var se jmespath.SyntaxError
		if errors.As(err, &se) {
			msg := tokenName.ReplaceAllStringFunc(strings.TrimPrefix(se.Error(), "SyntaxError: "), func(t string) string {
				return strings.ToLower(t[1:])
			})
			return nil, usagef("Bad value for --query %s: %s: Parse error at column %d, for expression:\n\"%s\"\n%s^",
				expr, msg, se.Offset, expr, strings.Repeat(" ", se.Offset+1))
		}
		return nil, usagef("Bad value for --query %s: %v", expr, err)
	}
	return &query{expr: expr, compiled: c, keyOrder: hashKeyOrder(expr)}, nil
}

// tokenName matches go-jmespath's token names (tRbrace) in its messages, which read as
// jmespath.py's (rbrace) once the t is dropped.
var tokenName = regexp.MustCompile(`\bt[A-Z][A-Za-z]*\b`)

// search applies q to v. An error is one the expression raises on this data (an unknown
// function, an argument of the wrong type); the AWS CLI reports those after the call, with
// exit status 255.
func (q *query) search(v any) (out any, err error) {
	conv := queryConv{origin: map[uintptr]*object{}}
	in := conv.toQuery(v)
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("Bad value for --query %s: the expression failed on this response (%v)", q.expr, r)
		}
	}()
	res, err := q.compiled.Search(in)
	if err != nil {
		return nil, fmt.Errorf("Bad value for --query %s: %v", q.expr, err)
	}
	return conv.fromQuery(res, q.keyOrder), nil
}

// apply is search for a nil-able query: without one, v is returned as it is.
func (q *query) apply(v any) (any, error) {
	if q == nil {
		return v, nil
	}
	return q.search(v)
}

// queryConv converts between the CLI's values and go-jmespath's, remembering which map came
// from which object so that an object returned as it was keeps its member order.
type queryConv struct {
	origin map[uintptr]*object
}

func (c queryConv) toQuery(v any) any {
	switch t := v.(type) {
	case *object:
		m := make(map[string]any, t.len())
		for _, k := range t.keys {
			m[k] = c.toQuery(t.vals[k])
		}
		c.origin[reflect.ValueOf(m).Pointer()] = t
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = c.toQuery(e)
		}
		return l
	case json.Number:
		// JMESPath compares and computes with numbers; the literal's text is given back by
		// pyNumber, as Python's json module would print the parsed number.
		if f, err := strconv.ParseFloat(string(t), 64); err == nil {
			return f
		}
		return string(t)
	}
	return v
}

func (c queryConv) fromQuery(v any, keyOrder map[string]int) any {
	switch t := v.(type) {
	case nil, bool, string:
		return v
	case float64:
		return json.Number(pyNumber(t))
	case map[string]any:
		o := newObject()
		var keys []string
		if src, ok := c.origin[reflect.ValueOf(t).Pointer()]; ok && src.len() == len(t) {
			keys = src.keys
		} else {
			keys = make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool {
				pi, iok := keyOrder[keys[i]]
				pj, jok := keyOrder[keys[j]]
				if iok != jok {
					return iok
				}
				if iok && pi != pj {
					return pi < pj
				}
				return keys[i] < keys[j]
			})
		}
		for _, k := range keys {
			o.set(k, c.fromQuery(t[k], keyOrder))
		}
		return o
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = c.fromQuery(e, keyOrder)
		}
		return l
	}
	// Anything else a function might build: other slices, maps and numbers.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		l := make([]any, rv.Len())
		for i := range l {
			l[i] = c.fromQuery(rv.Index(i).Interface(), keyOrder)
		}
		return l
	case reflect.Map:
		m := map[string]any{}
		for _, k := range rv.MapKeys() {
			m[fmt.Sprint(k.Interface())] = rv.MapIndex(k).Interface()
		}
		return c.fromQuery(m, keyOrder)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32:
		return json.Number(pyNumber(rv.Float()))
	}
	return fmt.Sprint(v)
}

// pyNumber writes f as the AWS CLI prints the number: a whole number as an integer, anything
// else as Python's repr of a float (the shortest text that reads back as f, in exponent form
// below 1e-4 and from 1e16 on). NaN and infinities, which JSON cannot hold, print as null.
func pyNumber(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "null"
	case f == math.Trunc(f) && math.Abs(f) < 1e16:
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	if exp := math.Floor(math.Log10(math.Abs(f))); exp >= -4 && exp < 16 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

// hashKeyOrder lists the keys of expr's multi-select hashes ({Name: x, Type: y}) by their first
// position, so that the objects they build print their members in that order. It reads just
// enough of the grammar for that: brackets, quoted identifiers, raw strings and literals.
func hashKeyOrder(expr string) map[string]int {
	order := map[string]int{}
	var stack []byte
	expectKey := false
	var candidate string
	haveCandidate := false
	for i := 0; i < len(expr); i++ {
		ch := expr[i]
		if ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' {
			continue
		}
		if haveCandidate {
			if _, seen := order[candidate]; ch == ':' && !seen {
				order[candidate] = len(order)
			}
			haveCandidate = false
		}
		wasExpecting := expectKey
		expectKey = false
		switch {
		case ch == '{' || ch == '[' || ch == '(':
			stack = append(stack, ch)
			expectKey = ch == '{'
		case ch == '}' || ch == ']' || ch == ')':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ch == ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		case ch == '"' || ch == '\'' || ch == '`':
			end := closingQuote(expr, i)
			if ch == '"' && wasExpecting {
				var s string
				if json.Unmarshal([]byte(expr[i:end]), &s) == nil {
					candidate, haveCandidate = s, true
				}
			}
			i = end - 1
		case ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			j := i + 1
			for j < len(expr) && (expr[j] == '_' || expr[j] >= 'a' && expr[j] <= 'z' || expr[j] >= 'A' && expr[j] <= 'Z' || expr[j] >= '0' && expr[j] <= '9') {
				j++
			}
			if wasExpecting {
				candidate, haveCandidate = expr[i:j], true
			}
			i = j - 1
		}
	}
	return order
}

// closingQuote returns the index just past the quote that closes the one at expr[start],
// skipping backslash escapes; an unclosed quote runs to the end.
func closingQuote(expr string, start int) int {
	q := expr[start]
	for i := start + 1; i < len(expr); i++ {
		switch expr[i] {
		case '\\':
			i++
		case q:
			return i + 1
		}
	}
	return len(expr)
}

// legacyLiterals rewrites the backtick literals of expr that are not JSON (`gpu`) as the JSON
// strings jmespath.py reads them as: the AWS CLI still takes this deprecated form (jmespath.py's
// lexer retries a literal that fails to parse as '"' + lexeme.lstrip() + '"'), and users copy
// it from AWS's own examples, while go-jmespath takes JSON only. Raw strings and quoted
// identifiers are skipped whole; every other character is kept.
func legacyLiterals(expr string) string {
	var b strings.Builder
	for i := 0; i < len(expr); {
		ch := expr[i]
		if ch != '"' && ch != '\'' && ch != '`' {
			b.WriteByte(ch)
			i++
			continue
		}
		end := closingQuote(expr, i)
		if ch != '`' || end-i < 2 || expr[end-1] != '`' {
			b.WriteString(expr[i:end])
			i = end
			continue
		}
		lexeme := strings.ReplaceAll(expr[i+1:end-1], "\\`", "`")
		var v any
		if json.Unmarshal([]byte(lexeme), &v) != nil {
			var str string
			if json.Unmarshal([]byte(`"`+strings.TrimLeft(lexeme, " \t\n\r")+`"`), &str) == nil {
				quoted, _ := json.Marshal(str)
				b.WriteString("`" + strings.ReplaceAll(string(quoted), "`", "\\`") + "`")
				i = end
				continue
			}
		}
		b.WriteString(expr[i:end])
		i = end
	}
	return b.String()
}
