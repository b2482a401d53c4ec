package supplier

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The record is an append-only file of JSON lines, one object per line, each
// with a kind "k":
//
//	{"k":"boot","boot":2,"at":"…"}           a server started on the file
//	{"k":"ids","boot":2,"until":1789000060}  Msg_Id seconds reserved up to (Unix)
//	{"k":"submit","boot":2,"conn":1,…}       an accepted Submit (Entry)
//
// A line is written whole, before the SubmitResp it stands for is sent
// (RecordConfig.Sync says how far). Text lines and no schema keep it
// readable with grep and jq; msg_id is a decimal string because jq's
// numbers lose digits past 2^53.

// Entry is one accepted Submit (one segment of a long message) as recorded.
// It holds no phone number and no content, only their counts and a hash.
type Entry struct {
	// Boot is the server life that accepted it, counted from 1 per file.
	Boot int `json:"boot,omitzero"`
	// At is when it was accepted (server clock).
	At time.Time `json:"at,omitzero"`
	// Conn is the connection's number in that life, from 1 in accept order.
	Conn uint64 `json:"conn,omitempty"`
	// Account is the SourceAddr of the account that sent it.
	Account string `json:"acct,omitempty"`
	// Version is "2.0" or "3.0".
	Version string `json:"v,omitempty"`
	// Seq is the Submit's Sequence_Id.
	Seq uint32 `json:"seq,omitempty"`
	// MsgID is the Msg_Id of the SubmitResp (the first of Dests ids).
	MsgID uint64 `json:"msg_id,string,omitempty"`
	// Key is the submit key the SP tagged the Submit with: the Submit's own
	// Msg_Id field as a decimal number when not 0, else the 3.0 LinkID; ""
	// when neither is set. The sms gateway writes its submitId there so
	// that reconciliation can count supplier submits per submitId.
	Key string `json:"key,omitempty"`
	// Dests is the number of destinations (DestUsr_tl).
	Dests int `json:"dests,omitempty"`
	// PkTotal and PkNumber are Pk_total and Pk_number as sent.
	PkTotal  uint8 `json:"pk_total,omitempty"`
	PkNumber uint8 `json:"pk_number,omitempty"`
	// UDHRef, UDHTotal and UDHSeq are the concatenation element of the
	// content's UDH (TP_udhi 1); zero without one.
	UDHRef   uint16 `json:"udh_ref,omitempty"`
	UDHTotal uint8  `json:"udh_total,omitempty"`
	UDHSeq   uint8  `json:"udh_seq,omitempty"`
	// Fmt is Msg_Fmt and Len the Msg_Content length.
	Fmt uint8 `json:"fmt,omitempty"`
	Len int   `json:"len,omitempty"`
	// Hash is the first 8 bytes of the SHA-256 of Msg_Content, in hex: equal
	// contents, equal hashes, and nothing of the text.
	Hash string `json:"hash,omitempty"`
	// Report is true when the Submit asked for a status report.
	Report bool `json:"report,omitempty"`
	// NoAnswer is true when the server decided never to send its SubmitResp
	// (Behaviour.NoAnswerRate, DropEvery, DropRate).
	NoAnswer bool `json:"no_answer,omitempty"`
}

// recordLine is one line of any kind.
type recordLine struct {
	Kind  string `json:"k"`
	Until int64  `json:"until,omitempty"`
	Entry
}

// The line kinds.
const (
	kindBoot   = "boot"
	kindIDs    = "ids"
	kindSubmit = "submit"
)

// maxRecordLine bounds one line; an Entry line is a few hundred bytes.
const maxRecordLine = 4 << 10

// Record is what ReadRecord found in a record file.
type Record struct {
	// Entries are the accepted Submits in file order.
	Entries []Entry
	// Boots counts the server lives that wrote to the file.
	Boots int
	// TornTail is true when the file ends in a partial line (a crash in the
	// middle of a write); the partial line is ignored. A server reopening
	// the file cuts it off.
	TornTail bool
	// reservedUntil is the last Msg_Id reservation (Unix seconds).
	reservedUntil int64
	// validEnd is the length of the file up to the last whole line.
	validEnd int64
}

// ReadRecord reads a record file. A malformed line is an error naming its
// line number; a partial last line is not (Record.TornTail).
func ReadRecord(path string) (*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("supplier: record: %w", err)
	}
	defer f.Close()
	return readRecord(f)
}

func readRecord(r io.Reader) (*Record, error) {
	rec := &Record{}
	br := bufio.NewReaderSize(r, 2*maxRecordLine)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxRecordLine:
			return nil, fmt.Errorf("supplier: record line %d: longer than %d bytes", n, maxRecordLine)
		case errors.Is(err, io.EOF):
			rec.TornTail = len(line) > 0
			return rec, nil
		case err != nil:
			return nil, fmt.Errorf("supplier: record line %d: %w", n, err)
		}
		if err := rec.add(line); err != nil {
			return nil, fmt.Errorf("supplier: record line %d: %w", n, err)
		}
		rec.validEnd += int64(len(line))
	}
}

// add takes one whole line (with its '\n').
func (rec *Record) add(line []byte) error {
	var l recordLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return errors.New("not a JSON object")
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	switch l.Kind {
	case kindBoot:
		rec.Boots++
	case kindIDs:
		rec.reservedUntil = max(rec.reservedUntil, l.Until)
	case kindSubmit:
		rec.Entries = append(rec.Entries, l.Entry)
	}
	// Other kinds are from a later version and skipped.
	return nil
}

// SegmentKey names one segment of one tagged submit.
type SegmentKey struct {
	// Key is the submit key (Entry.Key).
	Key string
	// PkTotal and PkNumber are the segment's Pk_total and Pk_number.
	PkTotal, PkNumber uint8
}

// Counts are the record's accepted Submits counted for reconciliation.
type Counts struct {
	// Submits is the number of accepted Submits (segments count one each).
	Submits int
	// Boots is the number of server lives.
	Boots int
	// ByAccount counts Submits per account SourceAddr.
	ByAccount map[string]int
	// ByKey counts Submits per submit key; "" collects untagged ones.
	ByKey map[string]int
	// BySegment counts Submits per tagged segment; a count above 1 is a
	// segment the supplier received more than once.
	BySegment map[SegmentKey]int
}

// Counts counts the record's entries.
func (rec *Record) Counts() Counts {
	c := Counts{Submits: len(rec.Entries), Boots: rec.Boots,
		ByAccount: map[string]int{}, ByKey: map[string]int{}, BySegment: map[SegmentKey]int{}}
	for _, e := range rec.Entries {
		c.ByAccount[e.Account]++
		c.ByKey[e.Key]++
		if e.Key != "" {
			c.BySegment[SegmentKey{Key: e.Key, PkTotal: e.PkTotal, PkNumber: e.PkNumber}]++
		}
	}
	return c
}

// Duplicates returns the tagged segments accepted more than once, sorted.
func (c Counts) Duplicates() []SegmentKey {
	var out []SegmentKey
	for k, n := range c.BySegment {
		if n > 1 {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b SegmentKey) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.PkTotal, b.PkTotal), cmp.Compare(a.PkNumber, b.PkNumber))
	})
	return out
}

// recorder appends lines to the record file. Lines appended while another
// batch is being written go out together in one write (and one fsync): a
// group commit, so SyncFsync costs one flush per batch, not per Submit.
// append returns once its line is written (and synced) or failed. Safe for
// concurrent use.
type recorder struct {
	f     *os.File
	fsync bool

	mu    sync.Mutex // guards buf, batch
	buf   []byte
	batch uint64 // number of the batch buf is filling

	wmu     sync.Mutex // one writer at a time; guards written, err, spare
	written uint64     // batches written (all numbers below are done)
	err     error      // the first write error; every later append fails
	spare   []byte
}

// openRecorder opens (or creates) the record at path, reads it, cuts off a
// torn last line and appends a boot line. It returns the record as read.
func openRecorder(path string, policy SyncPolicy, now time.Time) (*recorder, *Record, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("supplier: record: %w", err)
	}
	rec, err := readRecord(f)
	if err == nil && rec.TornTail {
		err = f.Truncate(rec.validEnd)
	}
	if err == nil {
		_, err = f.Seek(rec.validEnd, io.SeekStart)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("supplier: record %s: %w", path, err)
	}
	r := &recorder{f: f, fsync: policy == SyncFsync}
	if err := r.appendLine(recordLine{Kind: kindBoot, Entry: Entry{Boot: rec.Boots + 1, At: now}}); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return r, rec, nil
}

// appendLine encodes l as one line and appends it.
func (r *recorder) appendLine(l recordLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("supplier: record: %w", err)
	}
	return r.append(append(b, '\n'))
}

func (r *recorder) append(line []byte) error {
	r.mu.Lock()
	r.buf = append(r.buf, line...)
	mine := r.batch
	r.mu.Unlock()

	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.written > mine || r.err != nil { // a writer before us took our line
		return r.err
	}
	r.mu.Lock()
	b := r.buf
	r.buf = r.spare[:0]
	r.batch++
	r.mu.Unlock()
	_, err := r.f.Write(b)
	if err == nil && r.fsync {
		err = r.f.Sync()
	}
	r.spare = b
	r.written = mine + 1
	if err != nil {
		r.err = fmt.Errorf("supplier: record: %w", err)
	}
	return r.err
}

// close syncs and closes the file.
func (r *recorder) close() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return errors.Join(r.f.Sync(), r.f.Close())
}
