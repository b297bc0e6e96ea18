package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/spf13/cobra"
)

// Exit statuses, as AWS CLI v2 documents them.
const (
	exitUsage   = 252 // the command line or the parameters are invalid; nothing was sent
	exitService = 254 // the service answered with an error
	exitOther   = 255 // anything else: no endpoint, no credentials, no connection
)

// addOperationCommands adds one command per API operation, named and parsed as `aws
// sagemaker` names and parses it, and built from the model at run time: api.Operations gives
// the commands, api.Shapes their options, help, validation and skeletons.
func addOperationCommands(root *cobra.Command) {
	const group = "operations"
	root.AddGroup(&cobra.Group{ID: group, Title: "API operations (spelled as `aws sagemaker <operation>`; `hale <operation> help` for options):"})
	for _, op := range api.Operations {
		cmd := &cobra.Command{
			Use:     kebab(op.Name) + " [options]",
			Short:   operationSummary(op),
			GroupID: group,
			// The AWS CLI's syntax (multi-value list options, --no-x booleans, shorthand) does
			// not fit pflag: the command reads its own arguments against the model.
			DisableFlagParsing: true,
			Args:               cobra.ArbitraryArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				return runOperation(cmd, op, args)
			},
		}
		cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
			fmt.Fprint(c.OutOrStdout(), operationHelp(op))
		})
		root.AddCommand(cmd)
	}
}

// cliError is an error printed as the AWS CLI prints it (after a blank line); it keeps the
// error it reports for callers that inspect it.
type cliError struct {
	text  string
	cause error
}

func (e *cliError) Error() string { return "\n" + e.text }
func (e *cliError) Unwrap() error { return e.cause }

func fail(code int, text string, cause error) error {
	return &exitError{code: code, err: &cliError{text: text, cause: cause}}
}

// runOperation runs one operation command: parse, build and validate the input, call (every
// page, unless paging was asked for), print.
func runOperation(cmd *cobra.Command, op *api.Operation, args []string) error {
	out := cmd.OutOrStdout()
	a, err := parseOpArgs(op, args)
	if err != nil {
		return usageFailure(op, err)
	}
	if a.help {
		fmt.Fprint(out, operationHelp(op))
		return nil
	}
	if a.skeleton == "input" {
		fmt.Fprint(out, printResult("json", op.Name, skeleton(api.Shapes[op.InputShape], map[string]int{}, false, ""), 0))
		return nil
	}
	// The expression is checked before anything is sent, as the CLI checks it while parsing.
	var q *query
	if a.query != nil {
		if q, err = compileQuery(*a.query); err != nil {
			return usageFailure(op, err)
		}
	}
	in, err := a.buildInput(op)
	if err != nil {
		return usageFailure(op, err)
	}
	if in, err = validateInput(in, api.Shapes[op.InputShape]); err != nil {
		return usageFailure(op, err)
	}
	if a.skeleton == "output" {
		var sk any = newObject()
		if op.OutputShape != "" {
			sk = skeleton(api.Shapes[op.OutputShape], map[string]int{}, true, "")
		}
		fmt.Fprint(out, printResult("json", op.Name, sk, 0))
		return nil
	}

	pg := op.Paginator
	autoPaginate := false
	if pg != nil {
		_, hasLimit := in.get(pg.LimitKey)
		_, hasToken := in.get(pg.InputToken)
		// Giving the service's own paging members turns automatic pagination off, as in AWS
		// CLI v2 (also when they come from --cli-input-json).
		if a.noPaginate || hasLimit || hasToken {
			if len(a.paging) > 0 {
				return fail(exitUsage, "Error during pagination: Cannot specify --no-paginate along with pagination arguments: "+strings.Join(a.paging, ", "), nil)
			}
		} else {
			autoPaginate = true
		}
	}

	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := client.New(ctx, client.Options{Profile: a.profile, Region: a.region, EndpointURL: a.endpointURL})
	if err != nil {
		return fail(exitOther, err.Error(), err)
	}
	if a.debug {
		c.Debug = cmd.ErrOrStderr()
	}
	call := func(in *object) (*object, error) {
		body, err := c.Call(ctx, op.Name, compactJSON(in))
		if err != nil {
			return nil, err
		}
		return parseResponse(body)
	}

	var result *object
	var pages *paged
	if autoPaginate {
		pages, err = paginate(op, in, pageOpts{maxItems: a.maxItems, pageSize: a.pageSize, startingToken: a.startingToken}, call)
	} else {
		result, err = call(in)
	}
	if err != nil {
		if cause := errors.Unwrap(err); a.debug && cause != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "DEBUG: %v\n", cause)
		}
		var e *api.Error
		if errors.As(err, &e) {
			return fail(exitService, fmt.Sprintf("An error occurred (%s) when calling the %s operation: %s", e.Code, op.Name, e.Message), e)
		}
		return fail(exitOther, err.Error(), err)
	}
	text, err := renderResponse(a.output, op.Name, q, result, pages, terminalWidth(out))
	if err != nil {
		// An expression that fails on the data (a function given the wrong type): the CLI
		// raises it while formatting, after the call, and exits 255.
		return fail(exitOther, err.Error(), err)
	}
	_, err = io.WriteString(out, text)
	return err
}

// parseResponse parses a response body, keeping the server's member order; an empty body is {}.
func parseResponse(body []byte) (*object, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return newObject(), nil
	}
	v, err := parseJSON(body)
	if err != nil {
		return nil, fmt.Errorf("the response is not JSON: %v", err)
	}
	o, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("the response is %s, not a JSON object", jsonKindName(v))
	}
	return o, nil
}

// usageFailure reports a command-line or parameter error with exit status 252; argument syntax
// errors get the CLI's usage preamble.
func usageFailure(op *api.Operation, err error) error {
	var u *usageError
	if !errors.As(err, &u) {
		return fail(exitOther, err.Error(), err)
	}
	text := u.msg
	if u.syntax {
		name := kebab(op.Name)
		text = fmt.Sprintf("usage: hale <operation> [options] [parameters]\nTo see help text, you can run:\n\n  hale %s help\n\nhale %s: error: %s", name, name, u.msg)
	}
	return fail(exitUsage, text, err)
}
