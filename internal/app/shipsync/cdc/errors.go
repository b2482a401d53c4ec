package cdc

import (
	"strings"
)

// ErrorKind classifies a DecodeError. The kinds are what a caller steers
// by: none of them may advance a partition's watermark, and each goes into
// the failure summary under its String name.
type ErrorKind int

const (
	// Malformed: the message is not a Debezium change event this package
	// can read (not JSON, a required envelope field absent or of the wrong
	// JSON type, an op letter it does not know, before/after contradicting
	// the op, a row that does not match its schema).
	Malformed ErrorKind = iota + 1
	// UnsupportedVersion: source.version names a connector major no
	// registered decoder handles, or source.connector is not "mysql".
	UnsupportedVersion
	// IncompatibleType: a column value does not match its declared type
	// (a string where int32 is declared, an int8 out of range, bad base64,
	// an unparseable ZonedTimestamp, NULL in a non-optional column), or the
	// declared type or semantic type is one this package does not map.
	IncompatibleType
	// MissingKey: a row event (or tombstone) without a record key, with an
	// empty key, or with a NULL key column.
	MissingKey
	// MissingType: a message without a schema has a column the caller's
	// TypeMap does not type, so its value cannot be mapped without guessing.
	MissingType
)

// String returns the kind's stable lower-case name ("malformed",
// "unsupported_version", "incompatible_type", "missing_key",
// "missing_type").
func (k ErrorKind) String() string {
	switch k {
	case Malformed:
		return "malformed"
	case UnsupportedVersion:
		return "unsupported_version"
	case IncompatibleType:
		return "incompatible_type"
	case MissingKey:
		return "missing_key"
	case MissingType:
		return "missing_type"
	default:
		return "unknown"
	}
}

// DecodeError is the only error type Decode returns. Field is the path of
// the offending part ("value.payload.after.price", "key.payload.id",
// "value.schema.fields[2]"): column and field names come from the message's
// schema, never its values, and are cut to a bounded, printable form.
// Problem is a short fixed phrase. No row value and no raw input byte ever
// appears in the error text.
type DecodeError struct {
	Kind    ErrorKind
	Field   string
	Problem string
}

// Error returns "cdc: KIND: FIELD: PROBLEM".
func (e *DecodeError) Error() string {
	return "cdc: " + e.Kind.String() + ": " + e.Field + ": " + e.Problem
}

// maxName bounds one path segment taken from the input (a column name).
const maxName = 64

// maxField bounds a whole field path (deeply nested schemas make long
// ones).
const maxField = 200

// fail builds a DecodeError.
func fail(kind ErrorKind, field, problem string) *DecodeError {
	if len(field) > maxField {
		field = field[:maxField]
	}
	return &DecodeError{Kind: kind, Field: field, Problem: problem}
}

// join appends a name taken from the input to a path, replacing anything
// but printable ASCII and cutting it to maxName bytes.
func join(path, name string) string {
	var b strings.Builder
	b.Grow(len(path) + 1 + min(len(name), maxName))
	b.WriteString(path)
	b.WriteByte('.')
	for i := 0; i < len(name) && i < maxName; i++ {
		c := name[i]
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b.WriteByte(c)
	}
	return b.String()
}
