package cdc_test

import (
	"fmt"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
)

// Example_decode decodes a schema-less insert whose table the caller typed
// from its DDL: the DECIMAL column is base64 text in the message and becomes
// an exact decimal string.
func Example_decode() {
	d, err := cdc.New(cdc.Config{Types: cdc.TypeMap{"ops.fuel": {
		"tank":  {Type: "int32", Required: true},
		"litre": {Type: "bytes", Name: cdc.SemanticDecimal, Scale: 2},
	}}})
	if err != nil {
		panic(err)
	}
	ev, err := d.Decode(cdc.Message{
		Topic: "ship0042.ops.fuel",
		Key:   []byte(`{"tank":3}`),
		Value: []byte(`{"op":"c","before":null,"after":{"tank":3,"litre":"AYav"},
			"source":{"version":"2.7.3.Final","connector":"mysql","db":"ops","table":"fuel",
			"file":"mysql-bin.000214","pos":4410,"row":0,"ts_ms":1796107260500},"ts_ms":1796107260712}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(ev.Op, ev.Source.File, ev.Source.Pos, ev.Key[0].GetIntValue())
	fmt.Println(ev.After.Columns[1].Name, ev.After.Columns[1].GetDecimalValue())

	_, err = d.Decode(cdc.Message{Topic: "ship0042.ops.fuel", Value: []byte(`{"op":"c","after":{"tank":3},
		"source":{"version":"9.0.0.Final","db":"ops","table":"fuel"}}`)})
	fmt.Println(err)
	// Output:
	// c mysql-bin.000214 4410 3
	// litre 1000.15
	// cdc: unsupported_version: value.payload.source.version: connector major not supported
}
