package api

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/haleproject/hale/internal/plural"
)

// validator collects constraint violations worded as the AWS front end words them:
//
//	Value 'x' at 'instanceGroups.1.member.instanceCount' failed to satisfy constraint: Member must ...
//
// and turns them into one ValidationException ("N validation errors detected: a; b").
type validator struct {
	errs []string
}

func (v *validator) add(value, path, rule string) {
	v.errs = append(v.errs, fmt.Sprintf("Value %s at '%s' failed to satisfy constraint: %s", value, path, rule))
}

// Violation records a rule the model cannot say (rules.go) in the same wording.
func (v *validator) violation(path, rule string) {
	v.errs = append(v.errs, fmt.Sprintf("Value at '%s' failed to satisfy constraint: %s", path, rule))
}

func (v *validator) null(path string) { v.add("null", path, "Member must not be null") }

// strLen is the length the service measures: UTF-16 code units, as Java's String.length.
func strLen(s string) int { return len(utf16.Encode([]rune(s))) }

func (v *validator) minLen(path, x string, n int) {
	if strLen(x) < n {
		v.add(quote(x), path, fmt.Sprintf("Member must have length greater than or equal to %d", n))
	}
}

func (v *validator) maxLen(path, x string, n int) {
	if strLen(x) > n {
		v.add(quote(x), path, fmt.Sprintf("Member must have length less than or equal to %d", n))
	}
}

func (v *validator) pattern(path, x string, re *regexp.Regexp, src string) {
	if !re.MatchString(x) {
		v.add(quote(x), path, "Member must satisfy regular expression pattern: "+src)
	}
}

func (v *validator) enum(path, x string, values any) {
	rv := reflect.ValueOf(values)
	names := make([]string, rv.Len())
	for i := range names {
		names[i] = rv.Index(i).String()
		if names[i] == x {
			return
		}
	}
	v.add(quote(x), path, "Member must satisfy enum value set: ["+strings.Join(names, ", ")+"]")
}

// minVal and maxVal check a value of an integer or float shape against its range.
func minVal[T int32 | float32](v *validator, path string, x T, n int64) {
	if float64(x) < float64(n) {
		v.add(quote(strconv.FormatFloat(float64(x), 'f', -1, 32)), path, fmt.Sprintf("Member must have value greater than or equal to %d", n))
	}
}

func maxVal[T int32 | float32](v *validator, path string, x T, n int64) {
	if float64(x) > float64(n) {
		v.add(quote(strconv.FormatFloat(float64(x), 'f', -1, 32)), path, fmt.Sprintf("Member must have value less than or equal to %d", n))
	}
}

func (v *validator) minItems(path string, x any, l, n int) {
	if l < n {
		v.add(quote(render(x)), path, fmt.Sprintf("Member must have length greater than or equal to %d", n))
	}
}

func (v *validator) maxItems(path string, x any, l, n int) {
	if l > n {
		v.add(quote(render(x)), path, fmt.Sprintf("Member must have length less than or equal to %d", n))
	}
}

func (v *validator) union(path string, set int) {
	if set != 1 {
		v.violation(path, fmt.Sprintf("Member must have exactly one member set (found %d)", set))
	}
}

func (v *validator) err() error {
	switch len(v.errs) {
	case 0:
		return nil
	case 1:
		return &Error{Code: CodeValidationException, Message: "1 validation error detected: " + v.errs[0]}
	}
	return &Error{Code: CodeValidationException,
		Message: fmt.Sprintf("%d validation errors detected: %s", len(v.errs), strings.Join(v.errs, "; "))}
}

func quote(s string) string { return "'" + s + "'" }

// render prints a list or map the way the service echoes one in a message: [a, b].
func render(x any) string {
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Slice:
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(deref(rv.Index(i)))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		return "{" + plural.Count(rv.Len(), "entry", "entries") + "}"
	}
	return fmt.Sprint(x)
}

func deref(v reflect.Value) any {
	if v.Kind() == reflect.Struct {
		return v.Type().Name()
	}
	return v.Interface()
}

func memberPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func listPath(path string, i int) string { return path + "." + strconv.Itoa(i+1) + ".member" }

func mapKeyPath(path, k string) string { return path + "." + k + ".key" }

func mapValuePath(path, k string) string { return path + "." + k + ".value" }
