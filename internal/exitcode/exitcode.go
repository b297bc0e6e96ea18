// Package exitcode is the exit status a command-line error carries, for hale's commands and
// the packages that build some of them (internal/orchestrator/slurm/slurmcli).
package exitcode

import "errors"

// Error is an error with the exit status the command ends with. hale's statuses follow the AWS
// CLI's: 1 for what the input says (a job not running, nothing to place), 2 for a wrong flag
// or file, 254 for the API's answer, 255 for no API to reach.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Of is the exit status err asks for: an Error's Code, else 1.
func Of(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 1
}
