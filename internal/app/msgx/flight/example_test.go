package flight_test

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Example_decideFlopGate decides a FLOP-GATE for a known flight: the gate
// collection is replaced whole, the version bumped, one notice emitted.
func Example_decideFlopGate() {
	raw := `<MSG><META><SNDR>AODB</SNDR><SEQN>2004</SEQN><DTTM>20260301083000</DTTM>
<TYPE>FLOP</TYPE><STYP>GATE</STYP></META>
<FLOP><FLGT><FLID>100001</FLID><GATE>
  <ITEM><SEQU>1</SEQU><CODE>B14</CODE><BTIM>20260301085000</BTIM></ITEM>
  <ITEM><SEQU>1</SEQU><CODE>B14</CODE><ABTM>20260301085500</ABTM></ITEM>
</GATE></FLGT></FLOP></MSG>`
	m, err := sisxml.Decode([]byte(raw))
	if err != nil {
		panic(err)
	}

	cur := &flight.State{FLID: "100001", Status: flight.Active, Version: 3, OperationDay: "20260301", FLNO: "CA1234"}
	cur.Resources[flight.GATE] = []flight.Resource{{Code: "B12"}}

	// The coordinator loads Involved(m, …) and their children into snap.
	fmt.Println("involved:", flight.Involved(m, nil))
	snap := map[string]*flight.State{cur.FLID: cur}
	msg := flight.Msg{ID: 2004, Kind: m.Meta.Kind(), Now: time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC)}
	ch, err := flight.Decide(snap, m, msg, flight.Settings{})
	if err != nil {
		panic(err)
	}
	for _, s := range ch.Saved {
		fmt.Println("saved:", s.FLID, "version", s.Version, "day", s.OperationDay)
		for i, g := range s.Resources[flight.GATE] {
			fmt.Println("  GATE", i+1, g.Code, *g.SourceSeq)
		}
	}
	for _, n := range ch.Notices {
		fmt.Println("KAFKA:msg", string(flight.NoticeDocument(n, msg)))
	}
	fmt.Println("current untouched:", cur.Version, cur.Resources[flight.GATE][0].Code)
	// Output:
	// involved: [100001]
	// saved: 100001 version 4 day 20260301
	//   GATE 1 B14 1
	//   GATE 2 B14 1
	// KAFKA:msg {"FLID":"100001","STATE_VERSION":4,"ACTION":"UPDATE","CAUSE":"FLOP-GATE","FIELDS":["GATE"],"MSG_ID":2004,"UPDATED_AT":"2026-03-01T00:30:00Z"}
	// current untouched: 3 B12
}
