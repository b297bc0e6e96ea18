package api

import "context"

// Operation is one operation of the model: its name (the X-Amz-Target suffix and the IAM
// action), its input and output shapes, the exceptions it declares and its paginator.
type Operation struct {
	Name        string
	InputShape  string
	OutputShape string // empty when the operation has no output
	Errors      []string
	Paginator   *Paginator
	NewInput    func() any // a new zero input (*<InputShape>)
	NewOutput   func() any // a new zero output; nil when the operation has no output

	invoke func(ctx context.Context, svc Service, in any) (any, error)
}

// Paginator names an operation's pagination members (botocore paginators-1.json).
type Paginator struct {
	InputToken, OutputToken, LimitKey, ResultKey string
}

// Invoke calls the operation's method on svc with in, which must come from NewInput.
func (op *Operation) Invoke(ctx context.Context, svc Service, in any) (any, error) {
	return op.invoke(ctx, svc, in)
}

var operationsByName = func() map[string]*Operation {
	m := make(map[string]*Operation, len(Operations))
	for _, op := range Operations {
		m[op.Name] = op
	}
	return m
}()

// LookupOperation returns the operation called name, or nil.
func LookupOperation(name string) *Operation {
	return operationsByName[name]
}
