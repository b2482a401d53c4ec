package arbiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/relaytype"
)

// ParseRow reads a JSON object of column → value as a row, for an
// operator's VALUE decision: strings and numbers as text (the database
// converts them to the column's type), null as NULL, booleans as booleans;
// columns in the object's order. Errors name a column, never a value.
func ParseRow(data []byte) (*pb.RowImage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	row := &pb.RowImage{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := k.(string)
		if name == "" {
			return nil, errors.New("a column name is empty")
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("column %s: %w", relaytype.QuoteValue(name), err)
		}
		c := &pb.ColumnValue{Name: name}
		switch x := v.(type) {
		case nil:
			c.Value = &pb.ColumnValue_Null{Null: true}
		case string:
			c.Value = &pb.ColumnValue_StringValue{StringValue: x}
		case json.Number:
			c.Value = &pb.ColumnValue_StringValue{StringValue: x.String()}
		case bool:
			c.Value = &pb.ColumnValue_BoolValue{BoolValue: x}
		default:
			return nil, fmt.Errorf("column %s: a value must be a string, number, boolean or null", relaytype.QuoteValue(name))
		}
		row.Columns = append(row.Columns, c)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("text after the JSON object")
	}
	return row, nil
}
