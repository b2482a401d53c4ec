package wire

import (
	"errors"
	"unicode/utf8"

	"github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Error classes. Every error this package returns wraps exactly one of them
// (ValidateEvent's *FieldError wraps ErrInvalidEvent and, for version
// problems, the version class too). Error texts are bounded and never carry
// row values or raw input bytes: they name a field by its path and say what
// is wrong with it.
var (
	// ErrMalformedVersion: a protocol_version or schema_version that is not
	// "MAJOR.MINOR".
	ErrMalformedVersion = errors.New("malformed version")
	// ErrUnsupportedMajor: a well-formed version whose major this receiver
	// does not support. Not retryable as is.
	ErrUnsupportedMajor = errors.New("unsupported major version")
	// ErrMalformedBatch: the request body or its event list is not a valid
	// message, or a required header field is absent or malformed.
	ErrMalformedBatch = errors.New("malformed batch")
	// ErrTooManyEvents: more events than the batch limit (500 by default).
	ErrTooManyEvents = errors.New("too many events in batch")
	// ErrBatchTooLarge: the event list is larger than the byte limit before
	// compression (4 MiB by default), or the body on the wire is.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrBadCompression: events_body does not decompress (corrupt zstd, an
	// unknown content encoding).
	ErrBadCompression = errors.New("bad compression")
	// ErrDecompressedTooLarge: events_body decompresses past its declared
	// size or the byte limit; decoding stops there (the bomb guard).
	ErrDecompressedTooLarge = errors.New("decompressed body too large")
	// ErrChecksumMismatch: the SHA-256, the declared uncompressed size or the
	// declared event count does not match the body.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrInvalidEvent: a ChangeEvent misses a required field, has a
	// malformed one, or contradicts itself. Returned as *FieldError.
	ErrInvalidEvent = errors.New("invalid change event")
)

// FieldError reports one invalid field of a ChangeEvent. Field is the field's
// path ("after.columns[3].value", indexes rather than column names, so no
// input text is echoed); Problem is a short fixed phrase; Reason is the
// stable code to put in an EventStatus or receipt. It matches ErrInvalidEvent
// with errors.Is, and ErrMalformedVersion / ErrUnsupportedMajor when the
// field is schema_version.
type FieldError struct {
	Field   string
	Problem string
	Reason  shipsyncpb.RejectReason
	class   error
}

// Error returns "invalid change event: FIELD: PROBLEM".
func (e *FieldError) Error() string {
	return ErrInvalidEvent.Error() + ": " + e.Field + ": " + e.Problem
}

// Unwrap lets errors.Is see ErrInvalidEvent and the version class, if any.
func (e *FieldError) Unwrap() []error {
	if e.class != nil {
		return []error{ErrInvalidEvent, e.class}
	}
	return []error{ErrInvalidEvent}
}

// maxErrorText bounds ErrorBody.message.
const maxErrorText = 200

// ErrorBody returns the refusal body for a batch-level error of this
// package: its code, whether a retry can help, and a bounded message. An
// error of no class here is ERROR_CODE_INTERNAL and retryable.
func ErrorBody(err error) *shipsyncpb.ErrorBody {
	b := &shipsyncpb.ErrorBody{Code: Code(err), Message: Bound(err.Error(), maxErrorText)}
	b.Retryable = b.Code == shipsyncpb.ErrorCode_ERROR_CODE_INTERNAL
	var fe *FieldError
	if errors.As(err, &fe) {
		b.Field = fe.Field
	}
	return b
}

// Code maps an error of this package to the ErrorBody code a refusal
// carries.
func Code(err error) shipsyncpb.ErrorCode {
	switch {
	case errors.Is(err, ErrUnsupportedMajor):
		return shipsyncpb.ErrorCode_ERROR_CODE_UNSUPPORTED_MAJOR
	case errors.Is(err, ErrMalformedVersion):
		return shipsyncpb.ErrorCode_ERROR_CODE_MALFORMED_VERSION
	case errors.Is(err, ErrTooManyEvents), errors.Is(err, ErrBatchTooLarge):
		return shipsyncpb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE
	case errors.Is(err, ErrBadCompression), errors.Is(err, ErrDecompressedTooLarge):
		return shipsyncpb.ErrorCode_ERROR_CODE_BAD_COMPRESSION
	case errors.Is(err, ErrChecksumMismatch):
		return shipsyncpb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH
	case errors.Is(err, ErrMalformedBatch), errors.Is(err, ErrInvalidEvent):
		return shipsyncpb.ErrorCode_ERROR_CODE_MALFORMED_BODY
	default:
		return shipsyncpb.ErrorCode_ERROR_CODE_INTERNAL
	}
}

// Bound cuts s to at most n bytes on a rune boundary and replaces invalid
// UTF-8, so a message, reason or detail stored or logged is always short
// text.
func Bound(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
