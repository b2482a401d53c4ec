package gateway_test

import (
	"fmt"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
)

// The send chain writes one command per segment (XADD sms:submit with
// Command.Values); the gateway reads it back with ParseCommand.
func ExampleParseCommand() {
	c := gateway.Command{SubmitID: 42, Channel: "cm", SrcID: "10690001", Dests: []string{"13900000000"},
		MsgFmt: cmpp.FmtASCII, Content: []byte("hello"), PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1}
	v := c.Values()
	fmt.Println(v["submit_id"], v["channel"], v["content"])
	got, err := gateway.ParseCommand(v)
	fmt.Println(got.SubmitID, string(got.Content), err)

	v["dests"] = "not-a-number"
	_, err = gateway.ParseCommand(v)
	fmt.Println(err)
	fmt.Println(gateway.SubmitEventID(42))
	// Output:
	// 42 cm aGVsbG8=
	// 42 hello <nil>
	// malformed submit command: dests: a number is not 1-21 digits
	// submit:42
}
