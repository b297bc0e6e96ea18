package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// DecodeInput decodes a request body for op strictly against the model and validates it.
//
//   - A body that is not a JSON object, or a member of the wrong JSON type, is a
//     SerializationException that names the member's path.
//   - A member the shape does not have is a ValidationException. hale rejects unknown members
//     instead of ignoring them: a misspelt or misplaced member (for example a
//     "ResilienceConfig" wrapper around NodeRecovery) would otherwise be dropped silently.
//   - Constraint violations (required, length, pattern, enum, range, list size) are a
//     ValidationException listing every violation, worded as the AWS front end words them.
//
// An empty body counts as {}.
func DecodeInput(op *Operation, body []byte) (any, error) {
	in := op.NewInput()
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, Errorf(CodeSerializationException, "Request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, Errorf(CodeSerializationException, "Request body has data after the JSON object")
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, Errorf(CodeSerializationException, "Request body must be a JSON object (the %s structure), not %s", op.InputShape, jsonKind(raw))
	}
	var v validator
	if err := walk(&v, Shapes[op.InputShape], obj, ""); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, in); err != nil {
		return nil, Errorf(CodeSerializationException, "Request body does not match %s: %v", op.InputShape, err)
	}
	in.(interface{ validate(*validator, string) }).validate(&v, "")
	if err := v.err(); err != nil {
		return nil, err
	}
	return in, nil
}

// walk checks that raw has the JSON type shape s expects, recursively. Type errors end the walk
// with a SerializationException; unknown members are recorded in v and the walk goes on.
func walk(v *validator, s *Shape, raw any, path string) error {
	if raw == nil {
		return nil // null is an absent member
	}
	where := path
	if where == "" {
		where = "the request"
	} else {
		where = "'" + where + "'"
	}
	mismatch := func(want string) error {
		return Errorf(CodeSerializationException, "Value at %s must be %s (shape %s), not %s", where, want, s.Name, jsonKind(raw))
	}
	switch s.Kind {
	case KindString:
		if _, ok := raw.(string); !ok {
			return mismatch("a string")
		}
	case KindBoolean:
		if _, ok := raw.(bool); !ok {
			return mismatch("a boolean")
		}
	case KindInteger:
		n, ok := raw.(json.Number)
		if !ok {
			return mismatch("a number")
		}
		i, err := n.Int64()
		if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
			return Errorf(CodeSerializationException, "Value %s at %s must be a whole number that fits in 32 bits (shape %s)", n, where, s.Name)
		}
	case KindFloat:
		n, ok := raw.(json.Number)
		if !ok {
			return mismatch("a number")
		}
		if f, err := n.Float64(); err != nil || math.Abs(f) > math.MaxFloat32 {
			return Errorf(CodeSerializationException, "Value %s at %s must be a number that fits in a 32-bit float (shape %s)", n, where, s.Name)
		}
	case KindTimestamp:
		n, ok := raw.(json.Number)
		if !ok {
			return mismatch("a number of epoch seconds")
		}
		if _, err := ParseEpoch(n.String()); err != nil {
			return Errorf(CodeSerializationException, "Value %s at %s is not a timestamp: %v", n, where, err)
		}
	case KindList:
		l, ok := raw.([]any)
		if !ok {
			return mismatch("a list")
		}
		for i, e := range l {
			ep := listPath(path, i)
			if e == nil {
				return Errorf(CodeSerializationException, "Value at '%s' is null; list members cannot be null", ep)
			}
			if err := walk(v, Shapes[s.Elem], e, ep); err != nil {
				return err
			}
		}
	case KindMap:
		m, ok := raw.(map[string]any)
		if !ok {
			return mismatch("a map (JSON object)")
		}
		for _, k := range sortedKeys(m) {
			e := m[k]
			if e == nil {
				return Errorf(CodeSerializationException, "Value at '%s' is null; map values cannot be null", mapValuePath(path, k))
			}
			if err := walk(v, Shapes[s.Elem], e, mapValuePath(path, k)); err != nil {
				return err
			}
		}
	case KindStructure:
		m, ok := raw.(map[string]any)
		if !ok {
			return mismatch("a structure (JSON object)")
		}
		for _, k := range sortedKeys(m) {
			e := m[k]
			mem := s.Member(k)
			if mem == nil {
				v.violation(memberPath(path, lowerCamelName(k)), fmt.Sprintf("%s has no member %q; unknown members are rejected, not ignored (members: %s)", s.Name, k, memberList(s)))
				continue
			}
			if err := walk(v, Shapes[mem.Shape], e, memberPath(path, lowerCamelName(k))); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func memberList(s *Shape) string {
	names := make([]string, len(s.Members))
	for i, m := range s.Members {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// lowerCamelName is a member's name as validation paths spell it.
func lowerCamelName(n string) string {
	if n == "" {
		return n
	}
	return strings.ToLower(n[:1]) + n[1:]
}

func jsonKind(raw any) string {
	switch raw.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", raw)
}
