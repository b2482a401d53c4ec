package shipsyncpb_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.golden with the current fields (only after adding fields)")

// wireLines lists every field and enum value of the protocol as
// "Message.field = number type" and "Enum.VALUE = number", sorted.
func wireLines(fd protoreflect.FileDescriptor) []string {
	var lines []string
	var msg func(m protoreflect.MessageDescriptor)
	enum := func(e protoreflect.EnumDescriptor) {
		for i := 0; i < e.Values().Len(); i++ {
			v := e.Values().Get(i)
			lines = append(lines, fmt.Sprintf("%s.%s = %d", e.Name(), v.Name(), v.Number()))
		}
	}
	msg = func(m protoreflect.MessageDescriptor) {
		for i := 0; i < m.Fields().Len(); i++ {
			f := m.Fields().Get(i)
			kind := f.Kind().String()
			switch {
			case f.Message() != nil:
				kind = string(f.Message().FullName())
			case f.Enum() != nil:
				kind = string(f.Enum().FullName())
			}
			var card string
			switch o := f.ContainingOneof(); {
			case f.IsMap():
				card = "map"
			case f.IsList():
				card = "repeated"
			case o != nil && !o.IsSynthetic():
				card = "oneof " + string(o.Name())
			case f.HasOptionalKeyword():
				card = "optional"
			default:
				card = "singular"
			}
			lines = append(lines, fmt.Sprintf("%s.%s = %d %s %s", m.Name(), f.Name(), f.Number(), card, kind))
		}
		for i := 0; i < m.Messages().Len(); i++ {
			msg(m.Messages().Get(i))
		}
	}
	for i := 0; i < fd.Messages().Len(); i++ {
		msg(fd.Messages().Get(i))
	}
	for i := 0; i < fd.Enums().Len(); i++ {
		enum(fd.Enums().Get(i))
	}
	slices.Sort(lines)
	return lines
}

// TestWireCompatible holds the compatibility rule of the protocol: a field
// or enum value, once released, keeps its number, cardinality and type
// forever. Every line of testdata/wire.golden must still be present as is;
// new lines are allowed (a minor change) and recorded with -update.
func TestWireCompatible(t *testing.T) {
	golden := filepath.Join("testdata", "wire.golden")
	now := wireLines(shipsyncpb.File_shipsync_proto)
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(strings.Join(now, "\n")+"\n"), 0o644))
	}
	raw, err := os.ReadFile(golden)
	require.NoError(t, err)
	var broken []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if !slices.Contains(now, line) {
			broken = append(broken, line)
		}
	}
	require.Empty(t, broken, "released fields or enum values changed or removed (a major change): %v", broken)
	var added []string
	for _, line := range now {
		if !strings.Contains(string(raw), line+"\n") {
			added = append(added, line)
		}
	}
	require.Empty(t, added, "new fields: record them with go test ./internal/app/shipsync/shipsyncpb -run TestWireCompatible -update")
}

// TestSeedFieldsPresent: ChangeEvent has every field the design names, and
// the status enums carry the design's values.
func TestSeedFieldsPresent(t *testing.T) {
	ev := (&shipsyncpb.ChangeEvent{}).ProtoReflect().Descriptor()
	for _, name := range []string{
		"schema_version", "event_id", "origin_node_id", "source_connector_id", "source_partition",
		"source_position", "source_sequence", "transaction_id", "transaction_order", "rule_id",
		"rule_version", "database", "schema", "table", "primary_key", "operation", "before", "after",
		"base_revision", "result_revision", "business_occurred_at", "captured_at", "trace_id",
	} {
		require.NotNil(t, ev.Fields().ByName(protoreflect.Name(name)), name)
	}
	require.Equal(t, 23, ev.Fields().Len())
	ub := (&shipsyncpb.UploadBatch{}).ProtoReflect().Descriptor()
	for _, name := range []string{"protocol_version", "node_id", "batch_id", "created_at", "uncompressed_bytes", "checksum", "events_body"} {
		require.NotNil(t, ub.Fields().ByName(protoreflect.Name(name)), name)
	}
	for _, v := range []string{"COMMAND_APPLIED", "COMMAND_ALREADY_APPLIED", "COMMAND_CONFLICT_REPORTED", "COMMAND_REJECTED"} {
		_, ok := shipsyncpb.CommandResult_value[v]
		require.True(t, ok, v)
	}
	for _, v := range []string{"RECEIVED", "RETRYABLE_FAILURE", "PERMANENT_REJECTED"} {
		_, ok := shipsyncpb.ReceiveStatus_value["RECEIVE_STATUS_"+v]
		require.True(t, ok, v)
	}
}
