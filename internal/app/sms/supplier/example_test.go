package supplier_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
)

// Example runs a simulated ISMG on loopback that fails one Submit in ten
// with Result 13 and reports every accepted one, logs an SP in over CMPP
// 3.0, submits a message tagged with the gateway's submitId 42, reads the
// SubmitResp and the status report, and counts the supplier's record.
func Example() {
	dir, err := os.MkdirTemp("", "supplier-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	record := filepath.Join(dir, "record.jsonl")
	srv, err := supplier.New(supplier.Config{
		Accounts:  []supplier.Account{{SourceAddr: "901234", Secret: "s3cret"}},
		Behaviour: supplier.Behaviour{FailRate: 0.1, ReportStats: []supplier.Weighted[string]{{Value: "DELIVRD", Weight: 1}}},
		Record:    supplier.RecordConfig{Path: record},
		Seed:      1,
	})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()

	sp, err := suppliertest.Dial(ctx, ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer sp.Close()
	login, _ := sp.Login("901234", "s3cret", cmpp.V30, time.Date(2026, 9, 20, 10, 0, 0, 0, time.UTC))
	fmt.Println("login status", login.Status)

	_, _ = sp.Send(suppliertest.Submit("901234", "13800138000", "hello", 42))
	_, pkt, _ := sp.Read()
	resp := pkt.(*cmpp.SubmitResp)
	fmt.Println("submit result", resp.Result)

	h, pkt, _ := sp.Read()
	var rp cmpp.Report
	_ = rp.Decode(pkt.(*cmpp.Deliver).MsgContent, cmpp.V30)
	fmt.Println("report", rp.Stat, "for the same Msg_Id:", rp.MsgID == resp.MsgID)
	_ = sp.Answer(h, pkt)

	_ = srv.Close()
	rec, _ := supplier.ReadRecord(record)
	fmt.Println("supplier accepted submitId 42", rec.Counts().ByKey["42"], "time(s)")
	// Output:
	// login status 0
	// submit result 0
	// report DELIVRD for the same Msg_Id: true
	// supplier accepted submitId 42 1 time(s)
}
