package wire

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

const (
	// MaxIdentLen bounds identifiers (node, connector, partition, rule,
	// database, schema, table, column names, trace and transaction ids).
	MaxIdentLen = 256
	// MaxColumns bounds the columns of one row image or key.
	MaxColumns = 4096
)

// Problems, a fixed vocabulary so that error texts never echo input.
const (
	problemMissing     = "missing"
	problemNotUUID     = "not a UUID"
	problemTooLong     = "too long"
	problemControl     = "contains control characters"
	problemInvalid     = "invalid"
	problemNull        = "NULL in a key column"
	problemDuplicate   = "duplicate column name"
	problemTooMany     = "too many columns"
	problemNotAllowed  = "not allowed for this operation"
	problemUnknownOp   = "unknown operation"
	problemSameAsBase  = "equals base_revision"
	problemWithoutTxID = "set without transaction_id"
	problemWithoutTxNo = "transaction_id set without transaction_order"
)

// ValidateEvent checks one ChangeEvent against the protocol's rules and
// returns nil or a *FieldError naming the first bad field (wrapping
// ErrInvalidEvent, plus ErrUnsupportedMajor or ErrMalformedVersion for a bad
// schema_version). Nothing is filled in or repaired: a missing or malformed
// field is reported (seed 004 §6.1: never guessed). The checks:
//
//   - schema_version is "MAJOR.MINOR" with a major in majors; a newer minor
//     is fine.
//   - event_id is a UUID; result_revision is a UUID; base_revision, when
//     set, is a UUID.
//   - origin_node_id, source_connector_id, source_partition, rule_id,
//     database, table and trace_id are present identifiers (at most
//     MaxIdentLen bytes, no control characters); schema and transaction_id
//     are identifiers when set.
//   - source_position is present (0 is a valid offset); source_sequence and
//     rule_version are ≥ 1; transaction_order is present exactly when
//     transaction_id is.
//   - primary_key has 1…MaxColumns columns, uniquely named, none NULL.
//   - operation is INSERT, UPDATE, DELETE or SNAPSHOT and the images and
//     revisions fit it: INSERT has after, no before, no base_revision;
//     UPDATE has after and base_revision (before optional) and a
//     result_revision different from base; DELETE has base_revision, no
//     after (before optional), and a result_revision (the tombstone)
//     different from base; SNAPSHOT has after and no before.
//   - every column of every image is named once and carries exactly one
//     well-formed value (NULL is `null: true`; DECIMAL is a decimal
//     numeral; DATE, TIME and JSON are well-formed; timestamps valid).
//   - captured_at is present and valid; business_occurred_at is valid when
//     present.
func ValidateEvent(ev *pb.ChangeEvent, majors []uint32) error {
	if ev == nil {
		return fieldErr("event", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if len(majors) == 0 {
		majors = SupportedMajorsDefault
	}
	if ev.SchemaVersion == "" {
		return fieldErr("schema_version", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if _, err := CheckVersion(ev.SchemaVersion, majors); err != nil {
		fe := &FieldError{Field: "schema_version", Problem: "malformed", Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD, class: ErrMalformedVersion}
		if v, perr := ParseVersion(ev.SchemaVersion); perr == nil {
			fe.Problem = fmt.Sprintf("unsupported major %d", v.Major)
			fe.Reason = pb.RejectReason_REJECT_REASON_UNSUPPORTED_SCHEMA_MAJOR
			fe.class = ErrUnsupportedMajor
		}
		return fe
	}
	if err := checkUUIDField("event_id", ev.EventId, true); err != nil {
		return err
	}
	for _, f := range []struct {
		name, value string
	}{
		{"origin_node_id", ev.OriginNodeId},
		{"source_connector_id", ev.SourceConnectorId},
		{"source_partition", ev.SourcePartition},
		{"rule_id", ev.RuleId},
		{"database", ev.Database},
		{"table", ev.Table},
		{"trace_id", ev.TraceId},
	} {
		if err := checkIdentField(f.name, f.value, true); err != nil {
			return err
		}
	}
	if err := checkIdentField("schema", ev.Schema, false); err != nil {
		return err
	}
	if ev.SourcePosition == nil {
		return fieldErr("source_position", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if ev.SourceSequence == 0 {
		return fieldErr("source_sequence", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if ev.RuleVersion == 0 {
		return fieldErr("rule_version", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if err := checkIdentField("transaction_id", ev.TransactionId, false); err != nil {
		return err
	}
	switch {
	case ev.TransactionId == "" && ev.TransactionOrder != nil:
		return fieldErr("transaction_order", problemWithoutTxID, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS)
	case ev.TransactionId != "" && ev.TransactionOrder == nil:
		return fieldErr("transaction_order", problemWithoutTxNo, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS)
	}
	if len(ev.PrimaryKey) == 0 {
		return fieldErr("primary_key", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if err := checkColumns("primary_key", ev.PrimaryKey, true); err != nil {
		return err
	}
	if err := checkOperation(ev); err != nil {
		return err
	}
	if ev.Before != nil {
		if err := checkColumns("before.columns", ev.Before.Columns, false); err != nil {
			return err
		}
	}
	if ev.After != nil {
		if err := checkColumns("after.columns", ev.After.Columns, false); err != nil {
			return err
		}
	}
	if ev.CapturedAt == nil {
		return fieldErr("captured_at", problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	}
	if err := checkTime("captured_at", ev.CapturedAt); err != nil {
		return err
	}
	if ev.BusinessOccurredAt != nil {
		if err := checkTime("business_occurred_at", ev.BusinessOccurredAt); err != nil {
			return err
		}
	}
	return nil
}

// ValidateEvent is ValidateEvent with the Codec's supported majors.
func (c *Codec) ValidateEvent(ev *pb.ChangeEvent) error {
	return ValidateEvent(ev, c.cfg.SupportedMajors)
}

// checkOperation checks the operation and how images and revisions fit it.
func checkOperation(ev *pb.ChangeEvent) error {
	inconsistent := pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS
	missing := pb.RejectReason_REJECT_REASON_MISSING_FIELD
	var needAfter, noAfter, noBefore, needBase, noBase bool
	switch ev.Operation {
	case pb.Operation_OPERATION_UNSPECIFIED:
		return fieldErr("operation", problemMissing, missing)
	case pb.Operation_OPERATION_INSERT:
		needAfter, noBefore, noBase = true, true, true
	case pb.Operation_OPERATION_UPDATE:
		needAfter, needBase = true, true
	case pb.Operation_OPERATION_DELETE:
		noAfter, needBase = true, true
	case pb.Operation_OPERATION_SNAPSHOT:
		needAfter, noBefore = true, true
	default:
		return fieldErr("operation", problemUnknownOp, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
	}
	switch {
	case needAfter && ev.After == nil:
		return fieldErr("after", problemMissing, missing)
	case noAfter && ev.After != nil:
		return fieldErr("after", problemNotAllowed, inconsistent)
	case noBefore && ev.Before != nil:
		return fieldErr("before", problemNotAllowed, inconsistent)
	case needBase && ev.BaseRevision == "":
		return fieldErr("base_revision", problemMissing, missing)
	case noBase && ev.BaseRevision != "":
		return fieldErr("base_revision", problemNotAllowed, inconsistent)
	}
	if err := checkUUIDField("base_revision", ev.BaseRevision, false); err != nil {
		return err
	}
	if err := checkUUIDField("result_revision", ev.ResultRevision, true); err != nil {
		return err
	}
	if ev.BaseRevision != "" && ev.BaseRevision == ev.ResultRevision {
		return fieldErr("result_revision", problemSameAsBase, inconsistent)
	}
	return nil
}

// checkColumns checks a key or image's columns: count, names, values; key
// columns may not be NULL.
func checkColumns(path string, cols []*pb.ColumnValue, key bool) error {
	if len(cols) > MaxColumns {
		return fieldErr(path, problemTooMany, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
	}
	seen := make(map[string]struct{}, len(cols))
	for i, c := range cols {
		at := func(sub string) string {
			if sub == "" {
				return fmt.Sprintf("%s[%d]", path, i)
			}
			return fmt.Sprintf("%s[%d].%s", path, i, sub)
		}
		if c == nil {
			return fieldErr(at(""), problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
		}
		if err := checkIdentField(at("name"), c.Name, true); err != nil {
			return err
		}
		if _, dup := seen[c.Name]; dup {
			return fieldErr(at("name"), problemDuplicate, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
		}
		seen[c.Name] = struct{}{}
		if p, reason := checkValue(c); p != "" {
			return fieldErr(at("value"), p, reason)
		}
		if key {
			if _, isNull := c.Value.(*pb.ColumnValue_Null); isNull {
				return fieldErr(at("value"), problemNull, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
			}
		}
	}
	return nil
}

// checkValue returns "" or the problem with c's value.
func checkValue(c *pb.ColumnValue) (string, pb.RejectReason) {
	invalid := pb.RejectReason_REJECT_REASON_INVALID_FIELD
	switch v := c.Value.(type) {
	case nil:
		return problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD
	case *pb.ColumnValue_Null:
		if !v.Null {
			return "null is false", invalid
		}
	case *pb.ColumnValue_DecimalValue:
		if !isDecimal(v.DecimalValue) {
			return "not a decimal numeral", invalid
		}
	case *pb.ColumnValue_DateValue:
		if !isDate(v.DateValue) {
			return "not YYYY-MM-DD", invalid
		}
	case *pb.ColumnValue_TimeValue:
		if !isTime(v.TimeValue) {
			return "not [-]HH:MM:SS[.ffffff]", invalid
		}
	case *pb.ColumnValue_JsonValue:
		if !json.Valid([]byte(v.JsonValue)) {
			return "not JSON", invalid
		}
	case *pb.ColumnValue_TimestampValue:
		if v.TimestampValue == nil || v.TimestampValue.CheckValid() != nil {
			return problemInvalid, invalid
		}
	}
	return "", pb.RejectReason_REJECT_REASON_UNSPECIFIED
}

func fieldErr(field, problem string, reason pb.RejectReason) *FieldError {
	return &FieldError{Field: Bound(field, 96), Problem: problem, Reason: reason}
}

func checkTime(field string, ts *timestamppb.Timestamp) error {
	if ts.CheckValid() != nil {
		return fieldErr(field, problemInvalid, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
	}
	return nil
}

func checkUUIDField(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return fieldErr(field, problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
	case v != "" && !isUUID(v):
		return fieldErr(field, problemNotUUID, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
	}
	return nil
}

func checkIdentField(field, v string, required bool) error {
	if v == "" {
		if required {
			return fieldErr(field, problemMissing, pb.RejectReason_REJECT_REASON_MISSING_FIELD)
		}
		return nil
	}
	if p := checkIdent(v); p != "" {
		return fieldErr(field, p, pb.RejectReason_REJECT_REASON_INVALID_FIELD)
	}
	return nil
}

// checkIdent returns "" for a usable identifier, else the problem.
func checkIdent(s string) string {
	switch {
	case s == "":
		return problemMissing
	case len(s) > MaxIdentLen:
		return problemTooLong
	case !utf8.ValidString(s):
		return problemInvalid
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return problemControl
		}
	}
	return ""
}

// isUUID reports whether s is a UUID in its canonical 8-4-4-4-12 text form
// (either case).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDecimal: [-]DIGITS[.DIGITS], at most 100 characters (DECIMAL has at
// most 65 digits).
func isDecimal(s string) bool {
	if len(s) > 100 {
		return false
	}
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return digits(s[:i]) && digits(s[i+1:])
		}
	}
	return digits(s)
}

// isDate: YYYY-MM-DD with month 01–12 and day 01–31 (MySQL's zero date
// 0000-00-00 is not a date and must be mapped by the rule, not sent).
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' || !digits(s[:4]) || !digits(s[5:7]) || !digits(s[8:]) {
		return false
	}
	m := (s[5]-'0')*10 + s[6] - '0'
	d := (s[8]-'0')*10 + s[9] - '0'
	return m >= 1 && m <= 12 && d >= 1 && d <= 31
}

// isTime: [-]H+:MM:SS[.f{1,6}] (MySQL TIME spans -838:59:59 to 838:59:59).
func isTime(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	h, rest, ok := cut(s, ':')
	if !ok || !digits(h) || len(h) > 3 {
		return false
	}
	m, rest, ok := cut(rest, ':')
	if !ok || len(m) != 2 || !digits(m) || m[0] > '5' {
		return false
	}
	sec, frac, hasFrac := cut(rest, '.')
	if len(sec) != 2 || !digits(sec) || sec[0] > '5' {
		return false
	}
	return !hasFrac || (len(frac) >= 1 && len(frac) <= 6 && digits(frac))
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
