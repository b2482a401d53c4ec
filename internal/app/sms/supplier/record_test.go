package supplier_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
	"github.com/relayhq/relay/relayclock"
)

// recordConfig is the test accounts with a record at path.
func recordConfig(path string, clock *relayclock.Fake) supplier.Config {
	return supplier.Config{
		Accounts: []supplier.Account{{SourceAddr: spBoth, Secret: secretBoth}, {SourceAddr: sp20, Secret: secret20}},
		Clock:    clock,
		Record:   supplier.RecordConfig{Path: path, Sync: supplier.SyncFsync},
	}
}

// TestRecordAcrossRestarts: every accepted Submit is in the record once the
// server is closed, a second life on the same file (restarted within the same
// second) appends to it and issues no Msg_Id of the first, and the counts per
// submit key show the Submits a gateway sent twice.
func TestRecordAcrossRestarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "record.jsonl")
	clock := relayclock.NewFake(start)
	ids := map[uint64]bool{}
	accept := func(p *suppliertest.Peer, s *cmpp.Submit) uint64 {
		id := submitOK(t, p, s)
		require.False(t, ids[id], "Msg_Id %d issued twice", id)
		ids[id] = true
		return id
	}

	// First life: ten tagged Submits on 3.0, a two-segment message, an
	// untagged one, and a refused one (not recorded).
	b := serve(t, recordConfig(path, clock), clock)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	var first []uint64
	for key := uint64(1); key <= 10; key++ {
		s := suppliertest.Submit(spBoth, "13800138000", "same text", key)
		s.RegisteredDelivery = 0
		first = append(first, accept(p, s))
	}
	segs, err := cmpp.Split(strings.Repeat("x", 200), cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: func() uint16 { return 7 }})
	require.NoError(t, err)
	for _, seg := range segs {
		s := suppliertest.Submit(spBoth, "13800138000", "", 0)
		s.LinkID = "submit-long-1" // 3.0 may tag in LinkID instead
		s.RegisteredDelivery = 0
		s.PkTotal, s.PkNumber, s.TPUDHI, s.MsgContent = seg.PkTotal, seg.PkNumber, seg.TPUDHI, seg.Content
		accept(p, s)
	}
	untagged := suppliertest.Submit(spBoth, "13800138000", "untagged", 0)
	untagged.RegisteredDelivery = 0
	accept(p, untagged)
	bad := suppliertest.Submit(spBoth, "not-a-number", "refused", 99)
	_, err = p.Send(bad)
	require.NoError(t, err)
	_, pkt := next(t, p, cmpp.CmdSubmitResp)
	require.Equal(t, uint32(13), pkt.(*cmpp.SubmitResp).Result)
	b.stop()

	rec, err := supplier.ReadRecord(path)
	require.NoError(t, err)
	require.Len(t, rec.Entries, 13)
	require.Equal(t, 1, rec.Boots)
	e := rec.Entries[0]
	require.Equal(t, supplier.Entry{Boot: 1, At: start, Conn: 1, Account: spBoth, Version: "3.0", Seq: 2, MsgID: first[0],
		Key: "1", Dests: 1, PkTotal: 1, PkNumber: 1, Len: 9, Hash: e.Hash}, e)
	require.Len(t, e.Hash, 16)
	require.Equal(t, e.Hash, rec.Entries[1].Hash, "same content, same hash")
	require.NotEqual(t, e.Hash, rec.Entries[12].Hash)
	seg2 := rec.Entries[11]
	require.Equal(t, "submit-long-1", seg2.Key)
	require.Equal(t, []uint8{2, 2, 2, 2}, []uint8{seg2.PkTotal, seg2.PkNumber, seg2.UDHTotal, seg2.UDHSeq})
	require.Equal(t, uint16(7), seg2.UDHRef)

	// Second life, same instant: a gateway that crashed resends keys 5–7,
	// on 2.0 this time.
	b = serve(t, recordConfig(path, clock), clock)
	p = b.login(t, sp20, secret20, cmpp.V20)
	for key := uint64(5); key <= 7; key++ {
		s := suppliertest.Submit(sp20, "13800138000", "same text", key)
		s.RegisteredDelivery = 0
		accept(p, s)
	}
	b.stop()

	rec, err = supplier.ReadRecord(path)
	require.NoError(t, err)
	require.False(t, rec.TornTail)
	c := rec.Counts()
	require.Equal(t, 16, c.Submits)
	require.Equal(t, 2, c.Boots)
	require.Equal(t, map[string]int{spBoth: 13, sp20: 3}, c.ByAccount)
	require.Equal(t, 2, c.ByKey["5"])
	require.Equal(t, 1, c.ByKey["4"])
	require.Equal(t, 2, c.ByKey["submit-long-1"])
	require.Equal(t, 1, c.ByKey[""])
	require.Equal(t, []supplier.SegmentKey{{Key: "5", PkTotal: 1, PkNumber: 1}, {Key: "6", PkTotal: 1, PkNumber: 1},
		{Key: "7", PkTotal: 1, PkNumber: 1}}, c.Duplicates())
	for _, e := range rec.Entries[13:] {
		require.Equal(t, 2, e.Boot)
		require.Equal(t, "2.0", e.Version)
	}
}

// TestRecordNoAnswerAndDrop: Submits accepted without an answer are in the
// record, marked.
func TestRecordNoAnswerAndDrop(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "record.jsonl")
	clock := relayclock.NewFake(start)
	cfg := recordConfig(path, clock)
	cfg.Record.Sync = supplier.SyncWrite
	cfg.Behaviour.DropEvery = 2
	b := serve(t, cfg, clock)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	submitOK(t, p, suppliertest.Submit(spBoth, "13800138000", "one", 1))
	_, err := p.Send(suppliertest.Submit(spBoth, "13800138000", "two", 2))
	require.NoError(t, err)
	b.closed(t, p)
	b.stop()
	rec, err := supplier.ReadRecord(path)
	require.NoError(t, err)
	require.Len(t, rec.Entries, 2)
	require.False(t, rec.Entries[0].NoAnswer)
	require.True(t, rec.Entries[1].NoAnswer)
	require.True(t, rec.Entries[1].Report)
}

// TestRecordTornTail: a partial last line (a crash in a write) is ignored by
// ReadRecord and cut off by the next server; a malformed line elsewhere is an
// error naming it.
func TestRecordTornTail(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "record.jsonl")
	clock := relayclock.NewFake(start)
	b := serve(t, recordConfig(path, clock), clock)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	submitOK(t, p, suppliertest.Submit(spBoth, "13800138000", "kept", 1))
	b.stop()

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"k":"submit","boot":1,"key":"2"`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	rec, err := supplier.ReadRecord(path)
	require.NoError(t, err)
	require.True(t, rec.TornTail)
	require.Len(t, rec.Entries, 1)

	b = serve(t, recordConfig(path, clock), clock)
	b.stop()
	rec, err = supplier.ReadRecord(path)
	require.NoError(t, err)
	require.False(t, rec.TornTail)
	require.Len(t, rec.Entries, 1)
	require.Equal(t, 2, rec.Boots)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	lines[1] = "not json\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644))
	_, err = supplier.ReadRecord(path)
	require.ErrorContains(t, err, "record line 2: not a JSON object")
	_, err = supplier.New(recordConfig(path, clock))
	require.ErrorContains(t, err, "record line 2")
}

// TestReadRecordGolden holds the record format: a file written by this
// version (plus a line of a kind from a later one, skipped) reads to these
// entries and counts.
func TestReadRecordGolden(t *testing.T) {
	t.Parallel()
	rec, err := supplier.ReadRecord("testdata/record_v1.jsonl")
	require.NoError(t, err)
	require.Len(t, rec.Entries, 4)
	require.Equal(t, supplier.Entry{Boot: 2, At: time.Date(2026, 9, 20, 2, 0, 1, 0, time.UTC), Conn: 1, Account: sp20,
		Version: "2.0", Seq: 2, MsgID: 11108129030730743808, Key: "1", Dests: 3, PkTotal: 1, PkNumber: 1, Fmt: 8, Len: 10,
		Hash: "79f076abdd19a752", NoAnswer: true}, rec.Entries[3])
	c := rec.Counts()
	require.Equal(t, supplier.Counts{Submits: 4, Boots: 2,
		ByAccount: map[string]int{spBoth: 3, sp20: 1},
		ByKey:     map[string]int{"1": 2, "submit-long-1": 2},
		BySegment: map[supplier.SegmentKey]int{{Key: "1", PkTotal: 1, PkNumber: 1}: 2,
			{Key: "submit-long-1", PkTotal: 2, PkNumber: 1}: 1, {Key: "submit-long-1", PkTotal: 2, PkNumber: 2}: 1}}, c)
	require.Equal(t, []supplier.SegmentKey{{Key: "1", PkTotal: 1, PkNumber: 1}}, c.Duplicates())
}
