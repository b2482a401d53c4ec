package msgx_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// TestUnparseableSODT: seed 000 §12.3 — an ADFT for a new flight whose SODT
// cannot be parsed creates the flight with OPERATION_DAY NULL (SUCCEEDED, no
// retry, the queue goes on); a plan (DNLD/RESP) whose SODT cannot be parsed
// cannot derive the day, a whole-package check (§7.1 step 2): DEAD(PROTOCOL)
// at once, one attempt, nothing written.
func TestUnparseableSODT(t *testing.T) {
	b, dttm := startFromZero(t)
	day1 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	// The messages are written as the AODB writes them: XML whose SODT is
	// not the YYYYMMDDhhmmss form.
	unparseable := func(m *sisxml.Message, flid string) string {
		raw := string(encode(t, m))
		good := "<FLID>" + flid + "</FLID>"
		i := strings.Index(raw, good)
		require.GreaterOrEqual(t, i, 0)
		j := strings.Index(raw[i:], "<SODT>20261201093000</SODT>")
		require.GreaterOrEqual(t, j, 0, raw)
		return raw[:i+j] + "<SODT>2026-12-01 09:30</SODT>" + raw[i+j+len("<SODT>20261201093000</SODT>"):]
	}
	adft := b.putRaw(t, unparseable(schd("ADFT", "5001", dttm, "", plan("U1", "CA801", day1)), "U1"))
	dnld := b.putRaw(t, unparseable(schd("DNLD", "5002", dttm, "", plan("U3", "CA803", day1), plan("U2", "CA802", day1)), "U2"))
	after := b.put(t, schd("DNLD", "5003", dttm, "", plan("U4", "CA804", day1)))

	// One subtest per message, so that each rule is judged on its own.
	t.Run("ADFT creates the flight without a day", func(t *testing.T) {
		m := b.terminal(t, adft)
		require.Equal(t, relaytype.StateSucceeded, m.State, m.LastError)
		require.Zero(t, m.Attempts, "never failed")
		f := b.flights(t, "U1")["U1"]
		require.NotNil(t, f, "the ADFT created the flight")
		require.Empty(t, f.OperationDay, "OPERATION_DAY NULL")
		require.True(t, f.SODT.IsZero(), "the unparseable SODT is not applied")
		require.Equal(t, "CA801", f.FLNO)
	})
	t.Run("plan is DEAD(PROTOCOL) at once", func(t *testing.T) {
		m := b.terminal(t, dnld)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassProtocol, m.ErrorClass, m.LastError)
		require.Equal(t, 1, m.Attempts, "dead on its first attempt, not retried")
		require.Contains(t, m.LastError, `SODT "2026-12-01 09:30" is not a time`)
		require.Empty(t, b.flights(t, "U2", "U3"), "no half package")
	})
	t.Run("the queue goes on", func(t *testing.T) {
		m := b.terminal(t, after)
		require.Equal(t, relaytype.StateSucceeded, m.State, m.LastError)
	})
}

// TestDeclaredCountIsProtocol: seed 000 §7.1 step 2 — a wrong declared record
// count is a whole-package check: DEAD(PROTOCOL), one attempt, nothing
// written; invalid XML stays DEAD(MALFORMED), with its one attempt counted;
// an oversize message's error carries one "sisxml:" prefix. (The doubled
// prefix was in the encoder's size error, which TestEncodeRejects checks;
// the decoder's never had it, so that subtest guards against a regression.)
func TestDeclaredCountIsProtocol(t *testing.T) {
	b, dttm := startFromZero(t)
	day1 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	raw := string(encode(t, schd("DNLD", "6001", dttm, "", plan("R1", "CA901", day1))))
	require.Contains(t, raw, "<RCNT>1</RCNT>")
	count := b.putRaw(t, strings.Replace(raw, "<RCNT>1</RCNT>", "<RCNT>2</RCNT>", 1))
	notXML := b.putRaw(t, "hello")
	large := b.putRaw(t, "<MSG>"+strings.Repeat(" ", sisxml.MaxSize)+"</MSG>")

	t.Run("wrong RCNT is DEAD(PROTOCOL)", func(t *testing.T) {
		m := b.terminal(t, count)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassProtocol, m.ErrorClass, m.LastError)
		require.Contains(t, m.LastError, "RCNT declares 2 records, have 1")
		require.Equal(t, 1, m.Attempts)
		require.Empty(t, b.flights(t, "R1"))
	})
	t.Run("MALFORMED counts its one attempt", func(t *testing.T) {
		m := b.terminal(t, notXML)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassMalformed, m.ErrorClass, m.LastError)
		require.Equal(t, 1, m.Attempts, "processed once")
	})
	t.Run("oversize error has one prefix", func(t *testing.T) {
		m := b.terminal(t, large)
		require.Equal(t, relaytype.ClassMalformed, m.ErrorClass, m.LastError)
		require.Contains(t, m.LastError, "sisxml: message too large")
		require.Equal(t, 1, strings.Count(m.LastError, "sisxml:"), m.LastError)
	})
}

// TestDeletedFlightOutcomes: a message that names only DELETED flights
// applies nothing and is SKIPPED flight-deleted:<FLID>, whatever its kind — a
// plan, an ADFT, a FLOP, a repeated FDEL; a plan that also carries a live
// flight is SUCCEEDED.
func TestDeletedFlightOutcomes(t *testing.T) {
	b, dttm := startFromZero(t)
	day1 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	create := b.put(t, schd("DNLD", "7001", dttm, "", plan("D1", "CA701", day1)))
	del := b.put(t, fdel("7002", dttm, "D1"))
	planDel := b.put(t, schd("DNLD", "7003", dttm, "", plan("D1", "CA799", day1)))
	adftDel := b.put(t, schd("ADFT", "7004", dttm, "", plan("D1", "CA799", day1)))
	flopDel := b.put(t, flopBase("7005", dttm, "D1", "CA799"))
	fdelAgain := b.put(t, fdel("7006", dttm, "D1"))
	mixed := b.put(t, schd("DNLD", "7007", dttm, "", plan("D1", "CA799", day1), plan("D2", "CA702", day1)))

	for _, id := range []int64{create, del, mixed} {
		m := b.terminal(t, id)
		require.Equal(t, relaytype.StateSucceeded, m.State, "message %d: %s", id, m.LastError)
	}
	for _, id := range []int64{planDel, adftDel, flopDel, fdelAgain} {
		m := b.terminal(t, id)
		require.Equal(t, relaytype.StateSkipped, m.State, "message %d", id)
		require.Equal(t, "flight-deleted:D1", m.LastError, "message %d", id)
	}
	fs := b.flights(t, "D1", "D2")
	require.Equal(t, "CA701", fs["D1"].FLNO, "a deleted flight is never revived or changed")
	require.NotNil(t, fs["D2"])
	require.Equal(t, []snapRow{{Kind: "SCHD-DNLD", Identity: "AODB|SCHD|DNLD|7003", Outcome: "SKIPPED",
		Records: 1, Applied: 0, ScopeStart: ptr("20261201"), ScopeEnd: ptr("20261201")}}, b.snapLog(t, planDel))
}
