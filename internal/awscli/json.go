package awscli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The CLI keeps JSON values in their textual order, as the AWS CLI does (it parses with
// OrderedDict): a response is printed with its members in the order the server sent them, and
// a --cli-input-json document keeps its order on the wire. A value is one of nil, bool, string,
// json.Number (the literal as written, so epoch timestamps print as sent), []any and *object.

// object is a JSON object that remembers the order of its members.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

// get returns the member called k.
func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// set replaces k's value in place, or appends k; a duplicate key keeps its first position and
// its last value, as Python's json module does.
func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) len() int { return len(o.keys) }

// jsonSyntaxError is a parse failure with its position, for "Invalid JSON" messages.
type jsonSyntaxError struct {
	msg          string
	line, column int
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("%s at line %d column %d", e.msg, e.line, e.column)
}

// parseJSON parses one JSON value (and nothing after it) keeping object member order.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("extra data after the JSON value")
			if err2 != nil && err2 != io.EOF {
				err = err2
			}
		}
	}
	if err != nil {
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("unexpected end of JSON input")
			off = int64(len(data))
		}
		line, col := position(data, off)
		return nil, &jsonSyntaxError{msg: err.Error(), line: line, column: col}
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v, not a string", kt)
				}
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil // nil, bool, string, json.Number
	}
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col = 1, 1
	for _, r := range string(data[:off]) {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// writeJSON writes v as Python's json.dump(v, indent=4, ensure_ascii=False) does, which is what
// the AWS CLI prints: 4-space indentation, "key": value, empty containers as {} and [], and
// non-ASCII text left as it is. No newline is added.
func writeJSON(w *strings.Builder, v any, indent int) {
	pad := func(n int) { w.WriteString(strings.Repeat("    ", n)) }
	switch t := v.(type) {
	case nil:
		w.WriteString("null")
	case bool:
		if t {
			w.WriteString("true")
		} else {
			w.WriteString("false")
		}
	case string:
		writeJSONString(w, t)
	case json.Number:
		w.WriteString(string(t))
	case []any:
		if len(t) == 0 {
			w.WriteString("[]")
			return
		}
		w.WriteString("[\n")
		for i, e := range t {
			pad(indent + 1)
			writeJSON(w, e, indent+1)
			if i < len(t)-1 {
				w.WriteString(",")
			}
			w.WriteString("\n")
		}
		pad(indent)
		w.WriteString("]")
	case *object:
		if t.len() == 0 {
			w.WriteString("{}")
			return
		}
		w.WriteString("{\n")
		for i, k := range t.keys {
			pad(indent + 1)
			writeJSONString(w, k)
			w.WriteString(": ")
			writeJSON(w, t.vals[k], indent+1)
			if i < len(t.keys)-1 {
				w.WriteString(",")
			}
			w.WriteString("\n")
		}
		pad(indent)
		w.WriteString("}")
	default:
		b, _ := json.Marshal(t)
		w.Write(b)
	}
}

// writeJSONString quotes s as Python's json module does with ensure_ascii=False: only the
// quote, the backslash and control characters are escaped (Go's encoder would also escape
// <, >, & and U+2028/U+2029).
func writeJSONString(w *strings.Builder, s string) {
	w.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			w.WriteString(`\"`)
		case '\\':
			w.WriteString(`\\`)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		case '\b':
			w.WriteString(`\b`)
		case '\f':
			w.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(w, `\u%04x`, r)
			} else {
				w.WriteRune(r)
			}
		}
	}
	w.WriteByte('"')
}

// compactJSON encodes v on one line, for request bodies.
func compactJSON(v any) []byte {
	var b strings.Builder
	writeJSON(&b, v, 0)
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(b.String())); err != nil {
		return []byte(b.String())
	}
	return out.Bytes()
}

// pyStr renders a scalar as Python's str() does, which is how the AWS CLI's table and text
// output print values (True, False, None).
func pyStr(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case string:
		return t
	case json.Number:
		return string(t)
	}
	return pyRepr(v)
}

// pyRepr renders a value as Python's repr() does, for parameter-validation messages that quote
// what the user gave.
func pyRepr(v any) string {
	switch t := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "'", `\'`) + "'"
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *object:
		parts := make([]string, len(t.keys))
		for i, k := range t.keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(t.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return pyStr(v)
}
