package cmppconn

import (
	"errors"
	"fmt"
	"strconv"
)

// Outcome is what became of one Submit. Every Submit call returns exactly one
// (SubmitResult.Outcome), also when it returns an error.
type Outcome uint8

// The outcomes. Only OutcomeNotSent and OutcomeFlowControl say that sending
// the same message again cannot make a duplicate; OutcomeUnknown never does.
const (
	// OutcomeNotSent: no byte of the Submit was handed to the connection's
	// socket — the window or the rate limit was never passed, the connection
	// was closed first, the packet did not encode, or the write that was to
	// carry it failed before reaching its first byte. The ISMG cannot have
	// it: sending it again (here or on another connection) is safe.
	OutcomeNotSent Outcome = iota + 1
	// OutcomeAccepted: a SubmitResp with Result 0 came back; MsgID is the
	// ISMG's Msg_Id (for n destinations, the first of MsgID … MsgID+n−1).
	OutcomeAccepted
	// OutcomeRejected: a SubmitResp with a Result other than 0 and 8 came
	// back; the ISMG refused the message and will not deliver it.
	OutcomeRejected
	// OutcomeFlowControl: a SubmitResp with Result 8 (flow control) came
	// back. The ISMG refused the message for now; send it again later.
	OutcomeFlowControl
	// OutcomeUnknown: the Submit's bytes went (at least partly) to the
	// socket and no SubmitResp was matched to it — the response timeout
	// passed, the caller's ctx ended, or the connection was lost. The ISMG
	// may have accepted it. It is never a failure and must never be resent
	// blindly: reconcile it by its status report (matched on Msg_Id), by a
	// late SubmitResp (Config.LateResponseFunc), or by a person.
	OutcomeUnknown
)

// String returns the outcome's name in lower case ("not sent", "accepted",
// "rejected", "flow control", "unknown").
func (o Outcome) String() string {
	switch o {
	case OutcomeNotSent:
		return "not sent"
	case OutcomeAccepted:
		return "accepted"
	case OutcomeRejected:
		return "rejected"
	case OutcomeFlowControl:
		return "flow control"
	case OutcomeUnknown:
		return "unknown"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// SubmitResult is what Submit learnt about one Submit.
type SubmitResult struct {
	// Outcome is always set; see the Outcome constants.
	Outcome Outcome
	// MsgID is the SubmitResp's Msg_Id (Accepted, Rejected, FlowControl);
	// 0 otherwise.
	MsgID uint64
	// Result is the SubmitResp's Result: 0 accepted, 8 flow control, others
	// rejected (see ResultText). 0 when no SubmitResp came.
	Result uint32
	// Seq is the Sequence_Id the Submit went with; 0 when none was
	// allocated (the window or the rate limit was never passed).
	Seq uint32
	// ConnID names the connection (Conn.ID) that carried it; with Seq it is
	// the key a late SubmitResp is reported under (LateResponse).
	ConnID uint64
}

// Submit result codes that change the outcome (SubmitResp.Result).
const (
	ResultOK          = 0 // accepted
	ResultFlowControl = 8 // flow control: refused for now
)

// ResultText names a SubmitResp Result code from the standard (0–13), or
// says whether it is a reserved or vendor code (100–199).
func ResultText(r uint32) string {
	names := [...]string{
		"ok", "structure error", "command error", "duplicate sequence", "length error",
		"fee code error", "over maximum length", "service code error", "flow control",
		"fee number not served", "Src_Id error", "Msg_src error", "Fee_terminal_Id error",
		"Dest_terminal_Id error",
	}
	switch {
	case r < uint32(len(names)):
		return names[r]
	case r >= 100 && r <= 199:
		return "vendor code"
	}
	return "other error"
}

// The error classes. Submit's error wraps exactly one outcome class
// (ErrNotSent, ErrRejected, ErrFlowControl, ErrOutcomeUnknown) and, for
// NotSent and Unknown, the cause (a connection class below, ctx.Err(), a
// codec error, a write error). Texts name sequence numbers, connection ids,
// result codes and durations only: never message content, phone numbers or
// secrets.
var (
	// ErrNotSent: OutcomeNotSent. Safe to send again.
	ErrNotSent = errors.New("not sent")
	// ErrRejected: OutcomeRejected. Do not send the same message again.
	ErrRejected = errors.New("rejected by the ISMG")
	// ErrFlowControl: OutcomeFlowControl. Send again later.
	ErrFlowControl = errors.New("flow control")
	// ErrOutcomeUnknown: OutcomeUnknown. Never resend blindly.
	ErrOutcomeUnknown = errors.New("outcome unknown")

	// ErrResponseTimeout: no SubmitResp within Config.ResponseTimeout.
	ErrResponseTimeout = errors.New("no response in time")

	// ErrConnClosed: the connection is closed. Every reason below wraps
	// it, so errors.Is(err, ErrConnClosed) asks "did the connection go?".
	ErrConnClosed = errors.New("connection closed")
	// ErrClosed: Close was called (or the Pool stopped).
	ErrClosed = fmt.Errorf("%w by the client", ErrConnClosed)
	// ErrConnLost: reading or writing the socket failed, or the ISMG sent
	// bytes that do not frame.
	ErrConnLost = fmt.Errorf("%w: lost", ErrConnClosed)
	// ErrLinkDead: ActiveTest went unanswered N times (Config.ActiveTestTries).
	ErrLinkDead = fmt.Errorf("%w: link dead, active test unanswered", ErrConnClosed)
	// ErrTerminated: the ISMG sent Terminate.
	ErrTerminated = fmt.Errorf("%w: terminated by the ISMG", ErrConnClosed)

	// ErrLoginRefused: the ConnectResp Status was not 0 (see LoginError).
	ErrLoginRefused = errors.New("login refused")
	// ErrISMGAuth: the ConnectResp's AuthenticatorISMG does not prove the
	// shared secret: a wrong secret or not the expected gateway.
	ErrISMGAuth = errors.New("ISMG authenticator does not match")
	// ErrLoginTimeout: no ConnectResp within Config.ActiveTestTimeout (T).
	ErrLoginTimeout = errors.New("no login response in time")
	// ErrProtocol: the ISMG broke the protocol during login (another packet
	// than ConnectResp, another layout than the configured version).
	ErrProtocol = errors.New("protocol error")
	// ErrNoConnection: a Pool has no connection up to carry the Submit.
	ErrNoConnection = errors.New("no connection up")
)

// SubmitError is the error of a Submit that was not accepted. It wraps the
// outcome's class and the cause.
type SubmitError struct {
	// Outcome is NotSent, Rejected, FlowControl or Unknown.
	Outcome Outcome
	// Seq and ConnID are as in SubmitResult (0 when not allocated).
	Seq    uint32
	ConnID uint64
	// Result is the SubmitResp Result for Rejected and FlowControl.
	Result uint32
	// Err is the cause for NotSent and Unknown; nil otherwise.
	Err error
}

// Error returns "cmppconn: submit conn=C seq=S: <outcome>: <cause>".
func (e *SubmitError) Error() string {
	head := fmt.Sprintf("cmppconn: submit conn=%d seq=%d: ", e.ConnID, e.Seq)
	switch e.Outcome {
	case OutcomeRejected, OutcomeFlowControl:
		return head + fmt.Sprintf("%s: Result %d (%s)", e.class(), e.Result, ResultText(e.Result))
	}
	if e.Err == nil {
		return head + e.class().Error()
	}
	return head + e.class().Error() + ": " + e.Err.Error()
}

// Unwrap returns the outcome's class and the cause.
func (e *SubmitError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.class()}
	}
	return []error{e.class(), e.Err}
}

func (e *SubmitError) class() error {
	switch e.Outcome {
	case OutcomeNotSent:
		return ErrNotSent
	case OutcomeRejected:
		return ErrRejected
	case OutcomeFlowControl:
		return ErrFlowControl
	}
	return ErrOutcomeUnknown
}

// LoginError is a ConnectResp with a Status other than 0. It wraps
// ErrLoginRefused.
type LoginError struct {
	// Status is the ConnectResp Status: 1 bad structure, 2 illegal source
	// address (SP id), 3 authentication failed, 4 version too high, 5 and up
	// other errors.
	Status uint32
}

// Error names the status.
func (e *LoginError) Error() string {
	return fmt.Sprintf("cmppconn: login refused: Status %d (%s)", e.Status, StatusText(e.Status))
}

// Unwrap returns ErrLoginRefused.
func (e *LoginError) Unwrap() error { return ErrLoginRefused }

// Permanent reports whether retrying the same login cannot help until the
// configuration changes (Status 1–4): a Pool keeps retrying at its longest
// backoff level and logs it as an error.
func (e *LoginError) Permanent() bool { return e.Status >= 1 && e.Status <= 4 }

// StatusText names a ConnectResp Status.
func StatusText(s uint32) string {
	switch s {
	case 0:
		return "ok"
	case 1:
		return "bad structure"
	case 2:
		return "illegal source address"
	case 3:
		return "authentication failed"
	case 4:
		return "version too high"
	}
	return "other error"
}
