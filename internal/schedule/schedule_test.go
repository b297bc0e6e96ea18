package schedule

import (
	"strings"
	"testing"
	"time"
)

// AWS cron expressions run when AWS says they do (UTC; day-of-week 1 is Sunday), and the ones
// AWS refuses are refused with the rule they break.
func TestNext(t *testing.T) {
	from := time.Date(2026, 12, 5, 22, 30, 0, 0, time.UTC) // a Saturday
	for _, c := range []struct{ expr, want string }{
		{"cron(0 3 ? * SUN *)", "2026-12-06T03:00:00Z"},        // Sundays at 03:00
		{"cron(0 3 ? * 1 *)", "2026-12-06T03:00:00Z"},          // 1 is Sunday
		{"cron(15 10 ? * 2-6 *)", "2026-12-07T10:15:00Z"},      // weekdays: Monday next
		{"cron(0 0 1 * ? *)", "2027-01-01T00:00:00Z"},          // the first of each month
		{"cron(0 12 L * ? *)", "2026-12-31T12:00:00Z"},         // the month's last day
		{"cron(0 8 ? * 6#1 *)", "2027-01-01T08:00:00Z"},        // the first Friday
		{"cron(*/10 * ? * * *)", "2026-12-05T22:40:00Z"},       // every 10 minutes
		{"cron(0 4 ? * MON,THU 2027)", "2027-01-04T04:00:00Z"}, // names, a year
		{"cron(30 22 5 12 ? 2026)", "0001-01-01T00:00:00Z"},    // once, now past: never again
	} {
		s, err := Parse(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := s.Next(from).Format(time.RFC3339); got != c.want {
			t.Errorf("%s: next %s, want %s", c.expr, got, c.want)
		}
	}
	for _, c := range []struct{ expr, says string }{
		{"0 3 * * SUN", "is not cron("},
		{"cron(0 3 * * SUN)", "has 5 fields"},
		{"cron(0 3 * * SUN *)", "exactly one of day-of-month and day-of-week"},
		{"cron(0 3 ? * ? *)", "exactly one of day-of-month and day-of-week"},
		{"cron(0 3 ? * 8 *)", "day-of-week 8"},
		{"cron(61 3 ? * 1 *)", "cron(61 3"},
	} {
		if _, err := Parse(c.expr); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.expr, err, c.says)
		}
	}
}
