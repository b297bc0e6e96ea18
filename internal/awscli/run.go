// Package awscli is the AWS CLI's command line for hale's operations: `hale <operation>` is
// spelled, parsed and printed as `aws sagemaker <operation>` is (AWS CLI v2). It reads its
// arguments against the API model (api.Operations, api.Shapes): option names in kebab case,
// shorthand and JSON values, --cli-input-json and skeletons, the model's validation; it calls
// the operation through package client, follows the paginators, applies --query (JMESPath) and
// prints json, text or table as the CLI's formatters do. Its goldens (testdata/output) were
// made by the AWS CLI's own formatters, botocore and jmespath.py.
package awscli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
)

// Exit statuses, as AWS CLI v2 documents them.
const (
	ExitUsage   = 252 // the command line or the parameters are invalid; nothing was sent
	ExitService = 254 // the service answered with an error
	ExitOther   = 255 // anything else: no endpoint, no credentials, no connection
)

// Error is a failed command: the text the AWS CLI prints for it (after a blank line) and the
// exit status it ends with; Cause is the error it reports, for callers that inspect it.
type Error struct {
	Code  int
	Text  string
	Cause error
}

func (e *Error) Error() string { return "\n" + e.Text }
func (e *Error) Unwrap() error { return e.Cause }

func fail(code int, text string, cause error) error {
	return &Error{Code: code, Text: text, Cause: cause}
}

// Name is an operation's command name: CreateCluster is create-cluster, as botocore turns
// operation names into the CLI's.
func Name(op *api.Operation) string { return kebab(op.Name) }

// Summary is an operation's one-line description, for a list of commands.
func Summary(op *api.Operation) string { return operationSummary(op) }

// Help is an operation's help page (`hale <operation> help`).
func Help(op *api.Operation) string { return operationHelp(op) }

// Run runs one operation command with its arguments as the AWS CLI would: parse, build and
// validate the input, call (every page, unless paging was asked for), print to out; debug
// lines go to errOut. A failure is an *Error with the CLI's text and exit status.
func Run(ctx context.Context, op *api.Operation, args []string, out, errOut io.Writer) error {
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
				return fail(ExitUsage, "Error during pagination: Cannot specify --no-paginate along with pagination arguments: "+strings.Join(a.paging, ", "), nil)
			}
		} else {
			autoPaginate = true
		}
	}

	if ctx == nil {
		ctx = context.Background()
	}
	c, err := client.New(ctx, client.Options{Profile: a.profile, Region: a.region, EndpointURL: a.endpointURL})
	if err != nil {
		return fail(ExitOther, err.Error(), err)
	}
	if a.debug {
		c.Debug = errOut
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
			fmt.Fprintf(errOut, "DEBUG: %v\n", cause)
		}
		var e *api.Error
		if errors.As(err, &e) {
			return fail(ExitService, fmt.Sprintf("An error occurred (%s) when calling the %s operation: %s", e.Code, op.Name, e.Message), e)
		}
		return fail(ExitOther, err.Error(), err)
	}
	text, err := renderResponse(a.output, op.Name, q, result, pages, terminalWidth(out))
	if err != nil {
		// An expression that fails on the data (a function given the wrong type): the CLI
		// raises it while formatting, after the call, and exits 255.
		return fail(ExitOther, err.Error(), err)
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
		return fail(ExitOther, err.Error(), err)
	}
	text := u.msg
	if u.syntax {
		name := kebab(op.Name)
		text = fmt.Sprintf("usage: hale <operation> [options] [parameters]\nTo see help text, you can run:\n\n  hale %s help\n\nhale %s: error: %s", name, name, u.msg)
	}
	return fail(ExitUsage, text, err)
}
