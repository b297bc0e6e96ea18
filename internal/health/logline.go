package health

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Record is one kernel (or system) log line, with what its format says about it.
type Record struct {
	Time time.Time // zero when the line has none (plain dmesg's seconds since boot are not a time)
	// Uptime is the time since boot the line gives (dmesg's "[ 1843.308145]", kmsg's
	// microseconds); zero when it gives none.
	Uptime  time.Duration
	Host    string // syslog, journald and /var/log/messages lines name the host
	Level   string // the syslog level when the line gives it (kmsg priority, dmesg --decode)
	Message string // the message itself, without the format's prefixes
	Raw     string // the line as it was
}

var (
	// /dev/kmsg: "6,1234,5678901,-;message" (priority, sequence, microseconds since boot, flags).
	kmsgRE = regexp.MustCompile(`^(\d+),(\d+),(\d+),[^;]*;(.*)$`)
	// dmesg --decode: "kern  :warn  : " before the time or the message.
	decodeRE = regexp.MustCompile(`^([a-z]+)\s*:([a-z]+)\s*: (.*)$`)
	// dmesg --time-format iso: "2025-01-21T04:41:44,283302+00:00 message".
	isoRE = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?) (.*)$`)
	// dmesg -T / --ctime: "[Tue Apr  9 01:21:38 2024] message".
	ctimeRE = regexp.MustCompile(`^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?(.*)$`)
	// dmesg: "[ 1632.420956] message".
	monoRE = regexp.MustCompile(`^\[\s*(\d+\.\d+)\] ?(.*)$`)
	// syslog, /var/log/messages, journalctl (short): "Apr  9 01:21:38 host kernel: message".
	syslogRE = regexp.MustCompile(`^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (\S+) ([^:\[\s]+)(?:\[\d+\])?: ?(.*)$`)
	// journalctl -o short-iso / rsyslog RFC 3339: "2025-01-21T04:41:44+0000 host kernel: message".
	syslogISORE = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?) (\S+) ([^:\[\s]+)(?:\[\d+\])?: ?(.*)$`)
	// a bare "kernel: message" (logs quoted without their syslog head).
	kernelRE = regexp.MustCompile(`^kernel: ?(.*)$`)
)

var kmsgLevels = []string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// ParseLine reads one log line in any of the forms people meet: /dev/kmsg records, plain
// dmesg, dmesg -T/--ctime, dmesg --time-format iso with or without --decode's facility and
// level, syslog and /var/log/messages lines (with a host), journalctl's short and short-iso
// output, journalctl -o json records, and bare messages. The message inside a syslog line may
// itself carry dmesg's "[ seconds]" prefix; it is removed too.
func ParseLine(line string) Record {
	r := Record{Raw: line}
	s := strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		if m, ok := journalJSON(s); ok {
			return m
		}
	}
	if m := kmsgRE.FindStringSubmatch(s); m != nil {
		pri, _ := strconv.Atoi(m[1])
		r.Level = kmsgLevels[pri&7]
		if us, err := strconv.ParseInt(m[3], 10, 64); err == nil {
			r.Uptime = time.Duration(us) * time.Microsecond
		}
		r.Message = m[4]
		return r
	}
	if m := decodeRE.FindStringSubmatch(s); m != nil {
		r.Level = m[2]
		s = m[3]
	}
	switch {
	case ctimeRE.MatchString(s):
		m := ctimeRE.FindStringSubmatch(s)
		r.Time, _ = time.ParseInLocation("Mon Jan _2 15:04:05 2006", m[1], time.UTC)
		s = m[2]
	case syslogISORE.MatchString(s):
		m := syslogISORE.FindStringSubmatch(s)
		r.Time = parseISO(m[1])
		r.Host = m[2]
		s = m[4]
	case isoRE.MatchString(s):
		m := isoRE.FindStringSubmatch(s)
		r.Time = parseISO(m[1])
		s = m[2]
	case syslogRE.MatchString(s):
		m := syslogRE.FindStringSubmatch(s)
		if t, err := time.ParseInLocation("Jan _2 15:04:05", m[1], time.UTC); err == nil {
			r.Time = t.AddDate(time.Now().UTC().Year(), 0, 0) // syslog leaves the year out
		}
		r.Host = m[2]
		s = m[4]
	}
	if m := kernelRE.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	if m := monoRE.FindStringSubmatch(s); m != nil {
		if sec, err := strconv.ParseFloat(m[1], 64); err == nil {
			r.Uptime = time.Duration(sec * float64(time.Second))
		}
		s = m[2]
	}
	r.Message = s
	return r
}

func parseISO(s string) time.Time {
	s = strings.Replace(s, ",", ".", 1)
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// journalJSON reads a `journalctl -o json` record; other JSON lines are classified whole.
func journalJSON(s string) (Record, bool) {
	var j struct {
		Message  any    `json:"MESSAGE"`
		Realtime string `json:"__REALTIME_TIMESTAMP"`
		Host     string `json:"_HOSTNAME"`
		Priority string `json:"PRIORITY"`
	}
	// encoding/json matches keys without regard to case: a monitor's JSON with a "message"
	// key (an NVSentinel event) is no journal record and is classified whole.
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &keys) != nil || keys["MESSAGE"] == nil || json.Unmarshal([]byte(s), &j) != nil || j.Message == nil {
		return Record{}, false
	}
	r := Record{Raw: s, Host: j.Host}
	switch m := j.Message.(type) {
	case string:
		r.Message = m
	case []any: // journald writes non-UTF-8 messages as byte arrays
		b := make([]byte, 0, len(m))
		for _, v := range m {
			if f, ok := v.(float64); ok {
				b = append(b, byte(f))
			}
		}
		r.Message = string(b)
	}
	if us, err := strconv.ParseInt(j.Realtime, 10, 64); err == nil {
		r.Time = time.UnixMicro(us).UTC()
	}
	if p, err := strconv.Atoi(j.Priority); err == nil && p >= 0 && p < 8 {
		r.Level = kmsgLevels[p]
	}
	return r, true
}
