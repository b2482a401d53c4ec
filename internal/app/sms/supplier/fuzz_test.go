package supplier

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relayclock"
)

// FuzzReadRecord: any bytes either read as a record or fail with a short
// error; whatever reads, written back line by line, reads to the same counts.
func FuzzReadRecord(f *testing.F) {
	golden, err := os.ReadFile("testdata/record_v1.jsonl")
	require.NoError(f, err)
	f.Add(golden)
	f.Add([]byte(`{"k":"submit","key":"1"}` + "\n" + `{"k":"sub`))
	f.Add([]byte("{}\n{}{}\n"))
	f.Add([]byte(`{"k":"submit","msg_id":"18446744073709551616"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := readRecord(bytes.NewReader(data))
		if err != nil {
			require.Less(t, len(err.Error()), 200)
			return
		}
		var buf bytes.Buffer
		for range rec.Boots {
			buf.WriteString(`{"k":"boot"}` + "\n")
		}
		for _, e := range rec.Entries {
			b, err := json.Marshal(recordLine{Kind: kindSubmit, Entry: e})
			require.NoError(t, err)
			buf.Write(append(b, '\n'))
		}
		again, err := readRecord(&buf)
		require.NoError(t, err)
		require.Equal(t, rec.Counts(), again.Counts())
		require.LessOrEqual(t, rec.validEnd, int64(len(data)))
	})
}

// FuzzParseDist: no panic, short errors, and what parses prints back to
// itself.
func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"0", "10ms", "fixed:1s", "uniform:1ms..2ms", "exp:3ms", "exp:1ms+3ms..9ms", "exp:..", "uniform:.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			require.Less(t, len(err.Error()), 400)
			return
		}
		again, err := ParseDist(d.String())
		require.NoError(t, err)
		require.Equal(t, d, again)
	})
}

// FuzzParseWeights: no panic, and what parses passes validation.
func FuzzParseWeights(f *testing.F) {
	for _, s := range []string{"DELIVRD=95,UNDELIV=5", "13=1,8", "MA:0001=2", ",,=", "=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ws, err := ParseStats(s); err == nil {
			require.NoError(t, Behaviour{ReportStats: ws}.validate())
		}
		if ws, err := ParseResults(s); err == nil {
			require.NoError(t, Behaviour{ResultCodes: ws}.validate())
		}
	})
}

// FuzzServeConn sends arbitrary bytes on a logged-in connection of a live
// server: nothing it parses beyond the codec may panic or stop it from
// serving the next connection.
func FuzzServeConn(f *testing.F) {
	clock := relayclock.NewFake(time.Date(2026, 9, 20, 2, 0, 0, 0, time.UTC))
	srv, err := New(Config{Accounts: []Account{{SourceAddr: "901234", Secret: "s", MaxConns: 1000}}, Clock: clock,
		Behaviour: Behaviour{ReportBeforeRespRate: 0.5, DuplicateReportRate: 0.5, NoAnswerRate: 0.1}})
	require.NoError(f, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	f.Cleanup(func() {
		cancel()
		require.NoError(f, <-done)
		require.NoError(f, srv.Close())
	})
	for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
		seed := []byte{byte(v)}
		for i, p := range []cmpp.Packet{
			&cmpp.Submit{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, DestTerminalIDs: []string{"13800138000"}, MsgContent: []byte("hi")},
			&cmpp.Submit{PkTotal: 2, PkNumber: 1, TPUDHI: 1, MsgFmt: cmpp.FmtUCS2, DestTerminalIDs: []string{"1", "2"}, MsgContent: []byte{5, 0, 3, 9, 2, 1, 0, 'a'}},
			&cmpp.DeliverResp{MsgID: 1}, &cmpp.Query{Time: "20260920"}, &cmpp.Cancel{MsgID: 5}, &cmpp.ActiveTest{},
			&cmpp.ActiveTestResp{}, &cmpp.Terminate{},
		} {
			seed, err = cmpp.AppendPacket(seed, v, uint32(i+2), p)
			require.NoError(f, err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v := cmpp.V20
		if data[0]&0x10 != 0 { // 0x30 is 3.0, 0x20 is 2.0
			v = cmpp.V30
		}
		conn, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		watchdog, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		context.AfterFunc(watchdog, func() { _ = conn.Close() })
		req := cmpp.NewConnect("901234", "s", v, clock.Now())
		b, err := cmpp.AppendPacket(nil, v, 1, &req)
		require.NoError(t, err)
		_, err = conn.Write(append(b, data[1:]...))
		require.NoError(t, err)
		h, _, err := cmpp.NewFrameReader(conn).Next()
		require.NoError(t, err)
		require.Equal(t, cmpp.CmdConnectResp, h.CommandID)
	})
}
