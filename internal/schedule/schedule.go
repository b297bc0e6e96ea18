// Package schedule reads the cron expressions of HyperPod's ScheduledUpdateConfig: AWS's cron
// of six fields, "cron(minutes hours day-of-month month day-of-week year)", in UTC (the
// CloudFormation reference of AWS::SageMaker::Cluster ScheduledUpdateConfig, and EventBridge's
// cron, whose syntax it is). Evaluation is hashicorp/cronexpr's (Quartz's L, W and #); this
// package adds AWS's rules: the cron( ) wrapper, six fields, one of day-of-month and day-of-week
// a question mark, and day-of-week numbered 1-7 from Sunday.
package schedule

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cronexpr"
)

// Schedule is a parsed ScheduleExpression.
type Schedule struct {
	expr string
	cron *cronexpr.Expression
}

// Parse reads expr, "cron(0 3 ? * SUN *)". The error says which rule the expression breaks.
func Parse(expr string) (*Schedule, error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(expr), "cron(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return nil, fmt.Errorf("%q is not cron(minutes hours day-of-month month day-of-week year)", expr)
	}
	f := strings.Fields(strings.TrimSuffix(inner, ")"))
	if len(f) != 6 {
		return nil, fmt.Errorf("%q has %d fields; AWS cron has 6: minutes hours day-of-month month day-of-week year", expr, len(f))
	}
	if (f[2] == "?") == (f[4] == "?") {
		return nil, fmt.Errorf("%q: exactly one of day-of-month and day-of-week must be ?", expr)
	}
	dow, err := zeroBasedWeekdays(f[4])
	if err != nil {
		return nil, fmt.Errorf("%q: %v", expr, err)
	}
	f[4] = dow
	c, err := cronexpr.Parse(strings.Join(f, " "))
	if err != nil {
		return nil, fmt.Errorf("%q: %v", expr, err)
	}
	return &Schedule{expr: expr, cron: c}, nil
}

// weekdayNumber is the number of a day in a day-of-week item: its first one or two, before a
// range's end, a step, L or #.
var weekdayNumber = regexp.MustCompile(`^(\d+)(?:-(\d+))?`)

// zeroBasedWeekdays turns AWS's day-of-week numbers (1 Sunday ... 7 Saturday) into cronexpr's
// (0 Sunday ... 6 Saturday); names, *, ?, steps and the # ordinal are kept.
func zeroBasedWeekdays(field string) (string, error) {
	items := strings.Split(field, ",")
	for i, it := range items {
		m := weekdayNumber.FindStringSubmatchIndex(it)
		if m == nil {
			continue
		}
		conv := func(s string) (string, error) {
			n, _ := strconv.Atoi(s)
			if n < 1 || n > 7 {
				return "", fmt.Errorf("day-of-week %d is not 1 (Sunday) to 7 (Saturday)", n)
			}
			return strconv.Itoa(n - 1), nil
		}
		from, err := conv(it[m[2]:m[3]])
		if err != nil {
			return "", err
		}
		out := from
		if m[4] >= 0 {
			to, err := conv(it[m[4]:m[5]])
			if err != nil {
				return "", err
			}
			out += "-" + to
		}
		items[i] = out + it[m[1]:]
	}
	return strings.Join(items, ","), nil
}

// Next is the first time after t the schedule runs (UTC, whole minutes), or the zero time when
// it never runs again (a past year).
func (s *Schedule) Next(t time.Time) time.Time { return s.cron.Next(t.UTC()) }

// String is the expression as given.
func (s *Schedule) String() string { return s.expr }
