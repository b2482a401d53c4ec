package cmppconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// Example_pool keeps a channel of two connections to an ISMG up and sends a
// message through it, acting on the outcome as a gateway would.
func Example_pool() {
	ismg, err := newISMG(ismgConfig{version: cmpp.V30}) // a loopback ISMG of these tests
	if err != nil {
		panic(err)
	}
	defer ismg.close()

	ctx := context.Background()
	p, err := NewPool(PoolConfig{
		Conn: Config{Addr: ismg.addr(), Version: cmpp.V30, SourceAddr: "901234", Secret: "s3cret",
			Logger: slog.New(slog.DiscardHandler)},
		Size:      2,
		RateLimit: 100, // the channel's contracted Submits per second
	})
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = p.Stop(ctx) }()

	s := &cmpp.Submit{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, ServiceID: "MXT0001", MsgSrc: "901234",
		SrcID: "106900001", DestTerminalIDs: []string{"13800138000"}, MsgContent: []byte("hello")}
	res, err := p.Submit(ctx, s) // waits for a connection to come up
	switch {
	case err == nil:
		fmt.Println(res.Outcome, "with Msg_Id", res.MsgID == msgIDFor(s.MsgContent))
	case errors.Is(err, ErrNotSent), errors.Is(err, ErrFlowControl):
		fmt.Println("send again (later):", res.Outcome)
	case errors.Is(err, ErrOutcomeUnknown):
		fmt.Println("keep waiting for the status report; never resend:", res.Outcome)
	default:
		fmt.Println("refused by the carrier:", res.Result, ResultText(res.Result))
	}
	// Output:
	// accepted with Msg_Id true
}
