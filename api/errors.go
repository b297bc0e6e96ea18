package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error as the service answers it: a code (the wire "__type" and the
// x-amzn-ErrorType header) and a message. Code and HTTP status always come from the table in
// this file, so every layer of hale returns *Error and the HTTP edge only writes it out.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes the service returns for every operation, besides the modelled exceptions
// (CodeResourceNotFound, CodeResourceInUse, CodeResourceLimitExceeded, CodeConflictException).
// The signature codes are those of the AWS SigV4 front end; IncompleteSignature and
// MissingAuthenticationToken are spelled as in the SageMaker API reference's common errors.
const (
	CodeValidationException         = "ValidationException"
	CodeSerializationException      = "SerializationException"
	CodeUnknownOperationException   = "UnknownOperationException"
	CodeThrottlingException         = "ThrottlingException"
	CodeAccessDeniedException       = "AccessDeniedException"
	CodeMissingAuthenticationToken  = "MissingAuthenticationToken"
	CodeIncompleteSignature         = "IncompleteSignature"
	CodeInvalidSignatureException   = "InvalidSignatureException"
	CodeUnrecognizedClientException = "UnrecognizedClientException"
	CodeInternalFailure             = "InternalFailure"
	CodeServiceUnavailable          = "ServiceUnavailable"
)

// httpStatus is the one table from error code to HTTP status. SageMaker answers client errors
// with 400, authentication failures with 403 (IncompleteSignature stays 400, as the common
// errors page says), internal faults with 500 and overload with 503.
var httpStatus = map[string]int{
	CodeValidationException:         http.StatusBadRequest,
	CodeSerializationException:      http.StatusBadRequest,
	CodeUnknownOperationException:   http.StatusBadRequest,
	CodeThrottlingException:         http.StatusBadRequest,
	CodeAccessDeniedException:       http.StatusBadRequest,
	CodeResourceNotFound:            http.StatusBadRequest,
	CodeResourceInUse:               http.StatusBadRequest,
	CodeResourceLimitExceeded:       http.StatusBadRequest,
	CodeConflictException:           http.StatusBadRequest,
	CodeIncompleteSignature:         http.StatusBadRequest,
	CodeMissingAuthenticationToken:  http.StatusForbidden,
	CodeInvalidSignatureException:   http.StatusForbidden,
	CodeUnrecognizedClientException: http.StatusForbidden,
	CodeInternalFailure:             http.StatusInternalServerError,
	CodeServiceUnavailable:          http.StatusServiceUnavailable,
}

// HTTPStatus returns the HTTP status the service answers e with.
func (e *Error) HTTPStatus() int {
	if s, ok := httpStatus[e.Code]; ok {
		return s
	}
	return http.StatusBadRequest
}

// AsError returns err as an *Error: itself when it is (or wraps) one, else an InternalFailure
// whose message hides the internal detail.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalFailure, Message: "An internal error occurred; the server log has the detail."}
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
