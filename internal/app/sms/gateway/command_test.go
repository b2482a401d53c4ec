package gateway_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
)

func TestCommandRoundTrip(t *testing.T) {
	t.Parallel()
	c := command(18446744073709551615)
	c.Dests = []string{"13900000000", "13900000001"}
	c.LinkID = "link"
	got, err := gateway.ParseCommand(c.Values())
	require.NoError(t, err)
	require.Equal(t, c, got)
}

func TestParseCommandMalformed(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mod  func(map[string]any)
		want string
	}{
		"no submit_id":   {func(v map[string]any) { delete(v, "submit_id") }, "submit_id: missing"},
		"submit_id 0":    {func(v map[string]any) { v["submit_id"] = "0" }, "submit_id: below 1"},
		"submit_id big":  {func(v map[string]any) { v["submit_id"] = "18446744073709551616" }, "submit_id: not a decimal number in range"},
		"version":        {func(v map[string]any) { v["version"] = "2" }, "version: unsupported version"},
		"no channel":     {func(v map[string]any) { v["channel"] = "" }, "channel: length 0 not in 1-64"},
		"dest letters":   {func(v map[string]any) { v["dests"] = "1390,abc" }, "dests: a number is not 1-21 digits"},
		"msg_fmt":        {func(v map[string]any) { v["msg_fmt"] = "9" }, "msg_fmt: unknown coding"},
		"content base64": {func(v map[string]any) { v["content"] = "***" }, "content: not base64"},
		"pk_number":      {func(v map[string]any) { v["pk_number"] = "2" }, "pk_number: past pk_total"},
		"segment no udh": {func(v map[string]any) { v["pk_total"] = "2" }, "tp_udhi: a segment of a long message needs its UDH"},
		"report flag":    {func(v map[string]any) { v["registered_delivery"] = "2" }, "registered_delivery: not 0 or 1"},
		"not a string":   {func(v map[string]any) { v["src_id"] = 5 }, "src_id: not a string"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := command(3).Values()
			tc.mod(v)
			_, err := gateway.ParseCommand(v)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, gateway.ErrMalformed)
			require.Equal(t, "malformed submit command: "+tc.want, err.Error())
		})
	}
}

func TestParseCommandNeverQuotesValues(t *testing.T) {
	t.Parallel()
	v := command(3).Values()
	v["dests"] = "13912345678,secretx"
	_, err := gateway.ParseCommand(v)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "13912345678")
	require.NotContains(t, err.Error(), "secretx")
}

func FuzzParseCommand(f *testing.F) {
	c := command(42)
	v := c.Values()
	f.Add(v["submit_id"].(string), v["dests"].(string), v["content"].(string), "0", "1", "1")
	f.Add("1", "1", "AA==", "8", "2", "1")
	f.Fuzz(func(t *testing.T, id, dests, content, msgFmt, pkTotal, pkNumber string) {
		v := command(1).Values()
		v["submit_id"], v["dests"], v["content"], v["msg_fmt"], v["pk_total"], v["pk_number"] = id, dests, content, msgFmt, pkTotal, pkNumber
		got, err := gateway.ParseCommand(v)
		if err != nil {
			if !errors.Is(err, gateway.ErrMalformed) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if len(got.Content) == 0 || len(got.Content) > cmpp.MaxContent(got.MsgFmt) || got.PkNumber > got.PkTotal || got.SubmitID == 0 {
			t.Fatalf("accepted an invalid command")
		}
		again, err := gateway.ParseCommand(got.Values())
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

// A command published by the engine's outbox through relayredis arrives as
// the sink's fields with the command in "payload"; it parses as the same
// command, and a payload that is not the command's JSON is malformed.
func TestCommandFromOutboxPayload(t *testing.T) {
	t.Parallel()
	c := command(77)
	c.Dests = []string{"13900000000"}
	entry := map[string]any{"key": "cm-a", "relay-event-id": "cmd:77", "relay-seq": "1", "relay-type": "upsert",
		gateway.FieldPayload: string(c.Payload())}
	got, err := gateway.ParseCommand(entry)
	require.NoError(t, err)
	require.Equal(t, c, got)

	for _, bad := range []string{"", "[]", `{"submit_id":1}`, `{"payload":"{}"}`} {
		entry[gateway.FieldPayload] = bad
		_, err := gateway.ParseCommand(entry)
		require.ErrorIs(t, err, gateway.ErrMalformed, bad)
	}
}
