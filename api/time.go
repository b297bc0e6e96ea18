package api

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Time is a timestamp as the AWS JSON 1.1 protocol writes it: seconds since the Unix epoch as a
// JSON number, with the fraction kept (shape Timestamp has no timestampFormat, so the protocol
// default applies). hale keeps times to the millisecond, as the AWS SDKs parse them.
type Time struct {
	time.Time
}

// NewTime returns t truncated to the millisecond, in UTC.
func NewTime(t time.Time) Time {
	return Time{t.UTC().Truncate(time.Millisecond)}
}

// TimePtr returns a pointer to NewTime(t).
func TimePtr(t time.Time) *Time {
	v := NewTime(t)
	return &v
}

// MarshalJSON writes t as epoch seconds, for example 1700000000.123.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(FormatEpoch(t.Time)), nil
}

// FormatEpoch formats t as epoch seconds with up to millisecond fraction and no trailing zeros.
func FormatEpoch(t time.Time) string {
	ms := t.UnixMilli()
	sec, frac := ms/1000, ms%1000
	if frac < 0 {
		sec, frac = sec-1, frac+1000
	}
	if frac == 0 {
		return strconv.FormatInt(sec, 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%03d", sec, frac), "0")
}

// UnmarshalJSON reads epoch seconds from a JSON number.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	v, err := ParseEpoch(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseEpoch parses epoch seconds ("1700000000", "1700000000.5", "1.7e9").
func ParseEpoch(s string) (Time, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Time{}, fmt.Errorf("timestamp %q is not a number of epoch seconds", s)
	}
	sec, frac := int64(f), f-float64(int64(f))
	return NewTime(time.Unix(sec, int64(frac*1e9+0.5))), nil
}
