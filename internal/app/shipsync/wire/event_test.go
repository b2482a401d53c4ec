package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

func TestValidateEventAcceptsEveryOperation(t *testing.T) {
	t.Parallel()
	require.NoError(t, wire.ValidateEvent(validEvent(1), nil))

	ins := validEvent(2)
	ins.Operation, ins.Before, ins.BaseRevision = pb.Operation_OPERATION_INSERT, nil, ""
	require.NoError(t, wire.ValidateEvent(ins, nil))

	del := validEvent(3)
	del.Operation, del.After = pb.Operation_OPERATION_DELETE, nil
	require.NoError(t, wire.ValidateEvent(del, nil))

	snap := validEvent(4)
	snap.Operation, snap.Before, snap.BaseRevision = pb.Operation_OPERATION_SNAPSHOT, nil, ""
	require.NoError(t, wire.ValidateEvent(snap, nil))

	// Optional fields absent: no transaction, no business time, no schema,
	// no before image, source_position zero (a valid offset).
	min := validEvent(5)
	min.TransactionId, min.TransactionOrder, min.BusinessOccurredAt, min.Before = "", nil, nil, nil
	min.SourcePosition = proto.Uint64(0)
	require.NoError(t, wire.ValidateEvent(min, nil))
}

// TestValidateEventFailures: every rule of ValidateEvent, each with the
// field it names and the reason code; no error text carries a row value.
func TestValidateEventFailures(t *testing.T) {
	t.Parallel()
	const (
		missing      = pb.RejectReason_REJECT_REASON_MISSING_FIELD
		invalid      = pb.RejectReason_REJECT_REASON_INVALID_FIELD
		inconsistent = pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS
		unsupported  = pb.RejectReason_REJECT_REASON_UNSUPPORTED_SCHEMA_MAJOR
	)
	col := func(name string, v any) *pb.ColumnValue {
		c := &pb.ColumnValue{Name: name}
		switch v := v.(type) {
		case nil:
		case *pb.ColumnValue_Null:
			c.Value = v
		case *pb.ColumnValue_DecimalValue:
			c.Value = v
		case *pb.ColumnValue_DateValue:
			c.Value = v
		case *pb.ColumnValue_TimeValue:
			c.Value = v
		case *pb.ColumnValue_JsonValue:
			c.Value = v
		case *pb.ColumnValue_TimestampValue:
			c.Value = v
		case *pb.ColumnValue_StringValue:
			c.Value = v
		}
		return c
	}
	str := &pb.ColumnValue_StringValue{StringValue: secret}
	cases := []struct {
		name   string
		mutate func(e *pb.ChangeEvent)
		field  string
		reason pb.RejectReason
	}{
		{"no schema_version", func(e *pb.ChangeEvent) { e.SchemaVersion = "" }, "schema_version", missing},
		{"malformed schema_version", func(e *pb.ChangeEvent) { e.SchemaVersion = "1" }, "schema_version", invalid},
		{"unsupported major", func(e *pb.ChangeEvent) { e.SchemaVersion = "2.0" }, "schema_version", unsupported},
		{"no event_id", func(e *pb.ChangeEvent) { e.EventId = "" }, "event_id", missing},
		{"event_id not a UUID", func(e *pb.ChangeEvent) { e.EventId = secret }, "event_id", invalid},
		{"no origin_node_id", func(e *pb.ChangeEvent) { e.OriginNodeId = "" }, "origin_node_id", missing},
		{"origin_node_id too long", func(e *pb.ChangeEvent) { e.OriginNodeId = strings.Repeat("n", wire.MaxIdentLen+1) }, "origin_node_id", invalid},
		{"origin_node_id control chars", func(e *pb.ChangeEvent) { e.OriginNodeId = "ship\n1" }, "origin_node_id", invalid},
		{"no source_connector_id", func(e *pb.ChangeEvent) { e.SourceConnectorId = "" }, "source_connector_id", missing},
		{"no source_partition", func(e *pb.ChangeEvent) { e.SourcePartition = "" }, "source_partition", missing},
		{"no rule_id", func(e *pb.ChangeEvent) { e.RuleId = "" }, "rule_id", missing},
		{"no database", func(e *pb.ChangeEvent) { e.Database = "" }, "database", missing},
		{"no table", func(e *pb.ChangeEvent) { e.Table = "" }, "table", missing},
		{"no trace_id", func(e *pb.ChangeEvent) { e.TraceId = "" }, "trace_id", missing},
		{"bad schema", func(e *pb.ChangeEvent) { e.Schema = "a\x00b" }, "schema", invalid},
		{"no source_position", func(e *pb.ChangeEvent) { e.SourcePosition = nil }, "source_position", missing},
		{"no source_sequence", func(e *pb.ChangeEvent) { e.SourceSequence = 0 }, "source_sequence", missing},
		{"no rule_version", func(e *pb.ChangeEvent) { e.RuleVersion = 0 }, "rule_version", missing},
		{"bad transaction_id", func(e *pb.ChangeEvent) { e.TransactionId = "\x7f" }, "transaction_id", invalid},
		{"order without id", func(e *pb.ChangeEvent) { e.TransactionId = "" }, "transaction_order", inconsistent},
		{"id without order", func(e *pb.ChangeEvent) { e.TransactionOrder = nil }, "transaction_order", inconsistent},
		{"no primary_key", func(e *pb.ChangeEvent) { e.PrimaryKey = nil }, "primary_key", missing},
		{"NULL key column", func(e *pb.ChangeEvent) {
			e.PrimaryKey = append(e.PrimaryKey, col("k2", &pb.ColumnValue_Null{Null: true}))
		}, "primary_key[1].value", invalid},
		{"key column without value", func(e *pb.ChangeEvent) { e.PrimaryKey[0].Value = nil }, "primary_key[0].value", missing},
		{"key column without name", func(e *pb.ChangeEvent) { e.PrimaryKey[0].Name = "" }, "primary_key[0].name", missing},
		{"nil key column", func(e *pb.ChangeEvent) { e.PrimaryKey[0] = nil }, "primary_key[0]", missing},
		{"duplicate key column", func(e *pb.ChangeEvent) { e.PrimaryKey = append(e.PrimaryKey, col("id", str)) }, "primary_key[1].name", invalid},
		{"too many key columns", func(e *pb.ChangeEvent) {
			e.PrimaryKey = make([]*pb.ColumnValue, wire.MaxColumns+1)
		}, "primary_key", invalid},
		{"no operation", func(e *pb.ChangeEvent) { e.Operation = pb.Operation_OPERATION_UNSPECIFIED }, "operation", missing},
		{"unknown operation", func(e *pb.ChangeEvent) { e.Operation = 42 }, "operation", invalid},
		{"update without after", func(e *pb.ChangeEvent) { e.After = nil }, "after", missing},
		{"update without base", func(e *pb.ChangeEvent) { e.BaseRevision = "" }, "base_revision", missing},
		{"insert with before", func(e *pb.ChangeEvent) { e.Operation = pb.Operation_OPERATION_INSERT }, "before", inconsistent},
		{"insert with base", func(e *pb.ChangeEvent) { e.Operation, e.Before = pb.Operation_OPERATION_INSERT, nil }, "base_revision", inconsistent},
		{"insert without after", func(e *pb.ChangeEvent) {
			e.Operation, e.Before, e.BaseRevision, e.After = pb.Operation_OPERATION_INSERT, nil, "", nil
		}, "after", missing},
		{"delete with after", func(e *pb.ChangeEvent) { e.Operation = pb.Operation_OPERATION_DELETE }, "after", inconsistent},
		{"delete without base", func(e *pb.ChangeEvent) {
			e.Operation, e.After, e.BaseRevision = pb.Operation_OPERATION_DELETE, nil, ""
		}, "base_revision", missing},
		{"snapshot with before", func(e *pb.ChangeEvent) { e.Operation = pb.Operation_OPERATION_SNAPSHOT }, "before", inconsistent},
		{"base not a UUID", func(e *pb.ChangeEvent) { e.BaseRevision = "rev-1" }, "base_revision", invalid},
		{"no result_revision", func(e *pb.ChangeEvent) { e.ResultRevision = "" }, "result_revision", missing},
		{"result not a UUID", func(e *pb.ChangeEvent) { e.ResultRevision = "1" }, "result_revision", invalid},
		{"result equals base", func(e *pb.ChangeEvent) { e.ResultRevision = e.BaseRevision }, "result_revision", inconsistent},
		{"column without value", func(e *pb.ChangeEvent) { e.After.Columns[3].Value = nil }, "after.columns[3].value", missing},
		{"null false", func(e *pb.ChangeEvent) { e.After.Columns[1].Value = &pb.ColumnValue_Null{} }, "after.columns[1].value", invalid},
		{"bad decimal", func(e *pb.ChangeEvent) {
			e.After.Columns[6].Value = &pb.ColumnValue_DecimalValue{DecimalValue: "1e5" + secret}
		}, "after.columns[6].value", invalid},
		{"float-looking decimal", func(e *pb.ChangeEvent) { e.After.Columns[6].Value = &pb.ColumnValue_DecimalValue{DecimalValue: "1."} }, "after.columns[6].value", invalid},
		{"bad date", func(e *pb.ChangeEvent) {
			e.After.Columns[11].Value = &pb.ColumnValue_DateValue{DateValue: "0000-00-00"}
		}, "after.columns[11].value", invalid},
		{"bad time", func(e *pb.ChangeEvent) { e.After.Columns[12].Value = &pb.ColumnValue_TimeValue{TimeValue: "12:60:00"} }, "after.columns[12].value", invalid},
		{"bad json", func(e *pb.ChangeEvent) {
			e.After.Columns[13].Value = &pb.ColumnValue_JsonValue{JsonValue: "{" + secret}
		}, "after.columns[13].value", invalid},
		{"bad timestamp value", func(e *pb.ChangeEvent) {
			e.After.Columns[10].Value = &pb.ColumnValue_TimestampValue{TimestampValue: &timestamppb.Timestamp{Nanos: -1}}
		}, "after.columns[10].value", invalid},
		{"nil timestamp value", func(e *pb.ChangeEvent) {
			e.After.Columns[10].Value = &pb.ColumnValue_TimestampValue{}
		}, "after.columns[10].value", invalid},
		{"duplicate column", func(e *pb.ChangeEvent) { e.After.Columns[2].Name = "note" }, "after.columns[3].name", invalid},
		{"bad before column", func(e *pb.ChangeEvent) { e.Before.Columns[0].Name = "" }, "before.columns[0].name", missing},
		{"no captured_at", func(e *pb.ChangeEvent) { e.CapturedAt = nil }, "captured_at", missing},
		{"bad captured_at", func(e *pb.ChangeEvent) { e.CapturedAt = &timestamppb.Timestamp{Seconds: -62135596801} }, "captured_at", invalid},
		{"bad business_occurred_at", func(e *pb.ChangeEvent) {
			e.BusinessOccurredAt = &timestamppb.Timestamp{Nanos: 1e9}
		}, "business_occurred_at", invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ev := validEvent(1)
			c.mutate(ev)
			err := wire.ValidateEvent(ev, nil)
			requireClass(t, err, wire.ErrInvalidEvent)
			var fe *wire.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.field, fe.Field)
			require.Equal(t, c.reason, fe.Reason)
			require.Contains(t, err.Error(), c.field)
			body := wire.ErrorBody(err)
			wantCode := pb.ErrorCode_ERROR_CODE_MALFORMED_BODY
			switch {
			case c.reason == unsupported:
				wantCode = pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MAJOR
			case c.field == "schema_version" && c.reason == invalid:
				wantCode = pb.ErrorCode_ERROR_CODE_MALFORMED_VERSION
			}
			require.Equal(t, wantCode, body.Code)
			require.Equal(t, c.field, body.Field)
			require.False(t, body.Retryable)
		})
	}
	requireClass(t, wire.ValidateEvent(nil, nil), wire.ErrInvalidEvent)
}

func TestValueFormats(t *testing.T) {
	t.Parallel()
	check := func(v isValue, ok bool) {
		t.Helper()
		ev := validEvent(1)
		ev.After.Columns = []*pb.ColumnValue{{Name: "c"}}
		switch v := v.(type) {
		case *pb.ColumnValue_DecimalValue:
			ev.After.Columns[0].Value = v
		case *pb.ColumnValue_DateValue:
			ev.After.Columns[0].Value = v
		case *pb.ColumnValue_TimeValue:
			ev.After.Columns[0].Value = v
		}
		err := wire.ValidateEvent(ev, nil)
		if ok {
			require.NoError(t, err, "%v", v)
		} else {
			requireClass(t, err, wire.ErrInvalidEvent)
		}
	}
	for _, s := range []string{"0", "-0.5", "123", "99999999999999999999999999999999999999999999999999999999999999999.1"} {
		check(&pb.ColumnValue_DecimalValue{DecimalValue: s}, true)
	}
	for _, s := range []string{"", "-", ".5", "5.", "1.2.3", "+1", "1e3", "NaN", " 1", strings.Repeat("9", 101)} {
		check(&pb.ColumnValue_DecimalValue{DecimalValue: s}, false)
	}
	for _, s := range []string{"2026-01-01", "1000-12-31"} {
		check(&pb.ColumnValue_DateValue{DateValue: s}, true)
	}
	for _, s := range []string{"2026-13-01", "2026-1-01", "2026/01/01", "2026-01-32", "2026-01-00"} {
		check(&pb.ColumnValue_DateValue{DateValue: s}, false)
	}
	for _, s := range []string{"00:00:00", "23:59:59.5", "-838:59:59", "838:59:59.999999"} {
		check(&pb.ColumnValue_TimeValue{TimeValue: s}, true)
	}
	for _, s := range []string{"", "1:2:3", "00:00", "00:00:60", "1000:00:00", "00:00:00.", "00:00:00.1234567", "aa:00:00"} {
		check(&pb.ColumnValue_TimeValue{TimeValue: s}, false)
	}
}

type isValue interface{}
