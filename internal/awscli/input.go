package awscli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/haleproject/hale/api"
)

// Turning option values into the input document, as the AWS CLI's argprocess and paramfile
// modules do: file:// values are read, list options take several values or one JSON list,
// structures take JSON or shorthand, scalars are converted to the member's type.

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
	case api.KindFloat:
		if str, ok := v.(string); ok {
			return parseFloat(str)
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
	case api.KindFloat:
		n, err := parseFloat(value)
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

// parseFloat reads a number as Python's float() does, for the same error text.
func parseFloat(s string) (json.Number, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return "", fmt.Errorf("could not convert string to float: '%s'", s)
	}
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), nil
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
