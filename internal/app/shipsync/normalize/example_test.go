package normalize_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// noApplied is an applied_command table with nothing in it.
type noApplied struct{}

func (noApplied) Applied(context.Context, string, string) (normalize.AppliedCommand, bool, error) {
	return normalize.AppliedCommand{}, false, nil
}

// Example_normalize loads a rule, decodes a Debezium insert and normalises
// it into a ChangeEvent, then shows a write of unknown origin blocked.
func Example_normalize() {
	rules, err := normalize.LoadRules(strings.NewReader(`{"rules": [{
		"id": "fuel", "version": 1, "direction": "UPLINK", "database": "ops", "table": "fuel",
		"key_columns": ["tank"], "field_mappings": {"litre": "litres"}}]}`))
	if err != nil {
		panic(err)
	}
	n, err := normalize.New(normalize.Config{NodeID: "ship-0042", ConnectorID: "ship0042-mysql"}, rules, noApplied{})
	if err != nil {
		panic(err)
	}
	d, err := cdc.New(cdc.Config{Types: cdc.TypeMap{"ops.fuel": {
		"tank": {Type: "int32", Required: true}, "litre": {Type: "bytes", Name: cdc.SemanticDecimal, Scale: 2},
		"_sync_revision": {Type: "string"}, "_sync_origin": {Type: "string"}, "_sync_event_id": {Type: "string"},
	}}})
	if err != nil {
		panic(err)
	}
	record := func(origin string) *cdc.Event {
		ev, err := d.Decode(cdc.Message{Topic: "ship0042.ops.fuel", Key: []byte(`{"tank":3}`), Value: []byte(`{"op":"c",
			"after":{"tank":3,"litre":"AYav","_sync_revision":"0b6f4a1e-6d1c-4c61-9a57-2f0a6c1d9e01",
			"_sync_origin":"` + origin + `","_sync_event_id":null},
			"source":{"version":"2.7.3.Final","connector":"mysql","db":"ops","table":"fuel","ts_ms":1796107260500},
			"ts_ms":1796107260712}`)})
		if err != nil {
			panic(err)
		}
		return ev
	}
	src := normalize.Source{Topic: "ship0042.ops.fuel", Partition: 0, Offset: 41}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

	o, err := n.Normalize(context.Background(), src, record("ship-0042"), now)
	if err != nil {
		panic(err)
	}
	ev := o.Event
	fmt.Println(o.Disposition, ev.Operation, ev.EventId, ev.SourcePartition, ev.GetSourcePosition())
	fmt.Println(ev.ResultRevision, ev.After.Columns[1].Name, ev.After.Columns[1].GetDecimalValue(), len(ev.After.Columns))

	o, err = n.Normalize(context.Background(), src, record("ship-0099"), now)
	if err != nil {
		panic(err)
	}
	fmt.Println(o.Disposition, o.Reason)
	// Output:
	// emit OPERATION_INSERT 4d0e692d-4df4-5692-baea-fae7c7b1e93b ship0042.ops.fuel/0 41
	// 0b6f4a1e-6d1c-4c61-9a57-2f0a6c1d9e01 litres 1000.15 2
	// block unknown-origin
}
