package awscli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
)

// validateInput checks an input against its shape before anything is sent, as botocore's
// ParamValidator does for the AWS CLI: unknown members, missing required members, JSON types
// and union members, anywhere in the document, all reported at once and worded as botocore
// words them. Constraints (lengths, patterns, ranges, enums) are the server's to check, so
// that hale has one source of truth for them. It also turns timestamps given as text into the
// epoch seconds the protocol sends, and returns the input ready to send.
func validateInput(in *object, s *api.Shape) (*object, error) {
	var errs []string
	out := validateValue(in, s, "", &errs)
	if len(errs) > 0 {
		return nil, usagef("Parameter validation failed:\n%s", strings.Join(errs, "\n"))
	}
	return out.(*object), nil
}

// validateValue checks v against s, appending failures to errs, and returns v with its
// timestamps normalized. name is botocore's path: "" for the input, then ".Member" and "[i]".
func validateValue(v any, s *api.Shape, name string, errs *[]string) any {
	invalid := func(valid string) any {
		*errs = append(*errs, fmt.Sprintf("Invalid type for parameter %s, value: %s, type: %s, valid types: %s", displayName(name), pyStr(v), pyType(v), valid))
		return v
	}
	switch s.Kind {
	case api.KindStructure:
		o, ok := v.(*object)
		if !ok {
			return invalid("<class 'dict'>")
		}
		if s.Union {
			names := memberNames(s)
			if o.len() == 0 {
				*errs = append(*errs, fmt.Sprintf("Must set one of the following keys for tagged union structure %s: %s.", displayName(name), names))
			} else if o.len() > 1 {
				*errs = append(*errs, fmt.Sprintf("Invalid number of parameters set for tagged union structure %s. Can only set one of the following keys: %s.", displayName(name), names))
			}
		}
		for _, m := range s.Members {
			if _, ok := o.get(m.Name); m.Required && !ok {
				*errs = append(*errs, fmt.Sprintf("Missing required parameter in %s: %q", where(name), m.Name))
			}
		}
		for _, k := range o.keys {
			if s.Member(k) == nil {
				*errs = append(*errs, fmt.Sprintf("Unknown parameter in %s: %q, must be one of: %s", where(name), k, memberNames(s)))
			}
		}
		for _, k := range o.keys {
			if m := s.Member(k); m != nil {
				o.vals[k] = validateValue(o.vals[k], api.Shapes[m.Shape], name+"."+k, errs)
			}
		}
		return o
	case api.KindList:
		l, ok := v.([]any)
		if !ok {
			return invalid("<class 'list'>, <class 'tuple'>")
		}
		for i := range l {
			l[i] = validateValue(l[i], api.Shapes[s.Elem], fmt.Sprintf("%s[%d]", name, i), errs)
		}
		return l
	case api.KindMap:
		o, ok := v.(*object)
		if !ok {
			return invalid("<class 'dict'>")
		}
		for _, k := range o.keys {
			o.vals[k] = validateValue(o.vals[k], api.Shapes[s.Elem], name+"."+k, errs)
		}
		return o
	case api.KindString:
		if _, ok := v.(string); !ok {
			return invalid("<class 'str'>")
		}
	case api.KindInteger:
		if n, ok := v.(json.Number); !ok || !isIntegral(n) {
			return invalid("<class 'int'>")
		}
	case api.KindFloat:
		if _, ok := v.(json.Number); !ok {
			return invalid("<class 'float'>, <class 'decimal.Decimal'>, <class 'int'>")
		}
	case api.KindBoolean:
		if _, ok := v.(bool); !ok {
			return invalid("<class 'bool'>")
		}
	case api.KindTimestamp:
		if t, ok := toEpoch(v); ok {
			return t
		}
		return invalid("<class 'datetime.datetime'>, timestamp-string")
	}
	return v
}

// displayName and where spell a path as botocore's reports do.
func displayName(name string) string {
	return strings.TrimPrefix(name, ".")
}

func where(name string) string {
	if name == "" {
		return "input"
	}
	return displayName(name)
}

func memberNames(s *api.Shape) string {
	names := make([]string, len(s.Members))
	for i, m := range s.Members {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// pyType names v's type as Python would have parsed it.
func pyType(v any) string {
	switch t := v.(type) {
	case nil:
		return "<class 'NoneType'>"
	case bool:
		return "<class 'bool'>"
	case string:
		return "<class 'str'>"
	case json.Number:
		if isIntegral(t) {
			return "<class 'int'>"
		}
		return "<class 'float'>"
	case []any:
		return "<class 'list'>"
	}
	return "<class 'dict'>"
}

func isIntegral(n json.Number) bool {
	s := string(n)
	return s != "" && !strings.ContainsAny(s, ".eE")
}

// timestampLayouts are the text forms accepted for timestamps, besides epoch seconds: the
// ISO 8601 forms the AWS CLI documents (with or without fraction and zone, or a date alone).
// A time without a zone is UTC, as botocore takes it.
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"20060102T150405Z",
	"2006-01-02",
	time.RFC1123,
	time.RFC1123Z,
}

// toEpoch returns a timestamp value as the epoch-seconds number the protocol sends.
func toEpoch(v any) (json.Number, bool) {
	switch t := v.(type) {
	case json.Number:
		if e, err := api.ParseEpoch(string(t)); err == nil {
			return json.Number(api.FormatEpoch(e.Time)), true
		}
	case string:
		s := strings.TrimSpace(t)
		if e, err := api.ParseEpoch(s); err == nil {
			return json.Number(api.FormatEpoch(e.Time)), true
		}
		for _, layout := range timestampLayouts {
			if tm, err := time.Parse(layout, s); err == nil {
				return json.Number(api.FormatEpoch(tm)), true
			}
		}
	}
	return "", false
}
