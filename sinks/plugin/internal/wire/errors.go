package wire

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicecdc/sluice/sinks"
	pluginv1 "github.com/sluicecdc/sluice/sinks/plugin/proto/sluice/plugin/v1"
)

// ToStatus is the gRPC status error a plugin returns for err, a sink method's error: its message,
// and an ErrorInfo detail classifying it as sinks.IsPoison does. A status error already made
// (one the plugin built itself) passes through; nil stays nil. code is the gRPC code of an
// unclassified failure.
func ToStatus(err error, code codes.Code) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !sinks.IsPoison(err) {
		return err
	}
	class := pluginv1.ErrorInfo_CLASS_TRANSIENT
	if sinks.IsPoison(err) {
		class, code = pluginv1.ErrorInfo_CLASS_POISON, codes.FailedPrecondition
	}
	st, derr := status.New(code, err.Error()).WithDetails(&pluginv1.ErrorInfo{Class: class})
	if derr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

// FromStatus is the worker's view of err, the error of an RPC to a plugin doing what: poison
// (sinks.Poison) when its status carries ErrorInfo class POISON, transient otherwise, with
// the plugin's message and code. Only the detail decides, never the message.
func FromStatus(err error, what string) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*pluginv1.ErrorInfo); ok && info.GetClass() == pluginv1.ErrorInfo_CLASS_POISON {
			return sinks.Poison(fmt.Errorf("%s: the plugin refused it: %s", what, st.Message()))
		}
	}
	return fmt.Errorf("%s: %w", what, &RPCError{Code: st.Code(), Message: st.Message()})
}

// RPCError is a transient failure of an RPC to a plugin: its gRPC code and message.
type RPCError struct {
	Code    codes.Code
	Message string
}

// Error says the code and the plugin's message, and what to check for codes that need an
// operator.
func (e *RPCError) Error() string {
	switch e.Code {
	case codes.Unavailable:
		return fmt.Sprintf("plugin unavailable (%s); retrying: check that the plugin process runs and sink.plugin.address reaches it", e.Message)
	case codes.Unauthenticated:
		return fmt.Sprintf("plugin refused the credentials (%s); retrying: set sink.plugin.token (or token_file) to the token the plugin expects", e.Message)
	}
	return fmt.Sprintf("plugin error %s: %s", e.Code, e.Message)
}

// IsCode reports whether err is an RPCError with code c.
func IsCode(err error, c codes.Code) bool {
	var e *RPCError
	return errors.As(err, &e) && e.Code == c
}
