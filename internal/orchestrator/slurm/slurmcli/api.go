package slurmcli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/exitcode"
)

// API is how a command reaches a hale server's API: the flags that say where and as whom
// (--endpoint-url, --profile, ...) and a call with them.
type API interface {
	// AddFlags adds the connection flags to the command.
	AddFlags(cmd *cobra.Command)
	// CallJSON calls the operation with in as its JSON input and decodes the answer into out.
	// An ExitError keeps its exit status; any other error is the server's (254).
	CallJSON(ctx context.Context, op string, in, out any) error
}

// ExitError is an error with the command's exit status (exitcode.Error).
type ExitError = exitcode.Error

// apiError is err from API.CallJSON with its exit status: its own, else 254.
func apiError(err error) error {
	var coded *ExitError
	if errors.As(err, &coded) {
		return err
	}
	return &ExitError{Code: 254, Err: err}
}
