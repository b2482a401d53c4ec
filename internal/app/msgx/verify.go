package msgx

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Expectation is what a run must have produced: the simulator's own model of
// the flights and the processing mark of every committed mailbox row.
type Expectation struct {
	// Compare returns the differences between the expected flights and the
	// actual ones (business content; empty = equal).
	Compare func(actual []*flight.State) []string
	// Marks maps each committed CMINMSGS id to its expected PROCFLAG.
	Marks map[int64]string
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Flights, Deleted int // flights in the store, of which DELETED
	MailboxRows      int // committed mailbox rows checked
	MsgRecords       int // KAFKA:msg records read (duplicates included)
	SchdRecords      int // KAFKA:schd records read
	Problems         []string
}

// OK reports whether nothing was wrong.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// maxProblems bounds the report; the count says how many were cut.
const maxProblems = 50

func (r *VerifyReport) add(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Verify reconciles a finished run (seed 000 end to end): the store has no
// unfinished message; the flight state equals the expectation; every
// committed mailbox row carries its expected PROCFLAG and a PROCTIME; on
// KAFKA:msg each flight's notices, deduplicated by event id, carry the
// versions 1…STATE_VERSION exactly once and in order; on KAFKA:schd each
// flight's last record is its full state document (byte-equal to what the
// store's state gives) or, for a DELETED flight, a null-value tombstone, and
// versions never go backwards.
func Verify(ctx context.Context, cfg Config, store *relaypgx.Driver, mailbox *sql.DB, brokers []string, exp Expectation) (*VerifyReport, error) {
	rep := &VerifyReport{}
	stats, err := store.GetExecutor().MessageStats(ctx, cfg.Pipeline)
	if err != nil {
		return nil, fmt.Errorf("msgx verify: message stats: %w", err)
	}
	for _, st := range []relaytype.State{relaytype.StatePending, relaytype.StateFailed} {
		if n := stats.Counts[st]; n > 0 {
			rep.add("%d messages still %s", n, st)
		}
	}
	states, err := flightstore.LoadAll(ctx, store.Pool())
	if err != nil {
		return nil, fmt.Errorf("msgx verify: load flights: %w", err)
	}
	rep.Flights = len(states)
	byFLID := make(map[string]*flight.State, len(states))
	for _, s := range states {
		byFLID[s.FLID] = s
		if s.Status == flight.Deleted {
			rep.Deleted++
		}
	}
	if exp.Compare != nil {
		for _, d := range exp.Compare(states) {
			rep.add("flight state: %s", d)
		}
	}
	if err := verifyMarks(ctx, mailbox, exp.Marks, rep); err != nil {
		return nil, err
	}
	if err := verifyMsgTopic(ctx, brokers, cfg.MsgTopic, byFLID, rep); err != nil {
		return nil, err
	}
	if err := verifySchdTopic(ctx, brokers, cfg, byFLID, rep); err != nil {
		return nil, err
	}
	if n := len(rep.Problems); n > maxProblems {
		rep.Problems = append(rep.Problems[:maxProblems], fmt.Sprintf("… and %d more", n-maxProblems))
	}
	return rep, nil
}

func verifyMarks(ctx context.Context, mailbox *sql.DB, want map[int64]string, rep *VerifyReport) error {
	rows, err := mailbox.QueryContext(ctx, mailboxQueries["InboxMarks"])
	if err != nil {
		return fmt.Errorf("msgx verify: read CMINMSGS: %w", err)
	}
	defer rows.Close()
	seen := make(map[int64]bool, len(want))
	for rows.Next() {
		var (
			id      int64
			flag    sql.NullString
			hasTime bool
		)
		if err := rows.Scan(&id, &flag, &hasTime); err != nil {
			return fmt.Errorf("msgx verify: read CMINMSGS: %w", err)
		}
		seen[id] = true
		exp, ok := want[id]
		switch {
		case want != nil && !ok:
			rep.add("mailbox row %d is not in the expectation", id)
		case !flag.Valid:
			rep.add("mailbox row %d has no PROCFLAG (want %s)", id, exp)
		case want != nil && flag.String != exp:
			rep.add("mailbox row %d PROCFLAG %s, want %s", id, flag.String, exp)
		case !hasTime:
			rep.add("mailbox row %d has PROCFLAG but no PROCTIME", id)
		}
		rep.MailboxRows++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("msgx verify: read CMINMSGS: %w", err)
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if !seen[id] {
			rep.add("expected mailbox row %d is missing", id)
		}
	}
	return nil
}

// notice is the part of a KAFKA:msg payload Verify reads.
type notice struct {
	FLID         string `json:"FLID"`
	StateVersion int64  `json:"STATE_VERSION"`
}

func verifyMsgTopic(ctx context.Context, brokers []string, topic string, flights map[string]*flight.State, rep *VerifyReport) error {
	recs, err := kafkaread.All(ctx, brokers, topic)
	if err != nil {
		return fmt.Errorf("msgx verify: read %s: %w", topic, err)
	}
	rep.MsgRecords = len(recs)
	seenID := make(map[string]bool, len(recs))
	versions := make(map[string][]int64)
	for _, r := range recs {
		id := r.Headers[relaysink.HeaderEventID]
		if seenID[id] {
			continue // at-least-once: a redelivery of an event already seen
		}
		seenID[id] = true
		var n notice
		if err := json.Unmarshal(r.Value, &n); err != nil {
			rep.add("%s offset %d: payload is not a notice: %v", topic, r.Offset, err)
			continue
		}
		if n.FLID != r.Key {
			rep.add("%s offset %d: key %q carries FLID %q", topic, r.Offset, r.Key, n.FLID)
		}
		versions[r.Key] = append(versions[r.Key], n.StateVersion)
	}
	for _, flid := range slices.Sorted(maps.Keys(flights)) {
		s := flights[flid]
		got := versions[flid]
		if int64(len(got)) != s.Version {
			rep.add("%s: FLID %s has %d notices, want one per version 1..%d", topic, flid, len(got), s.Version)
			continue
		}
		for i, v := range got {
			if v != int64(i+1) {
				rep.add("%s: FLID %s notice %d has version %d, want %d (order or gap)", topic, flid, i+1, v, i+1)
				break
			}
		}
		delete(versions, flid)
	}
	for flid := range versions {
		rep.add("%s: notices for FLID %s, which is not in the store", topic, flid)
	}
	return nil
}

func verifySchdTopic(ctx context.Context, brokers []string, cfg Config, flights map[string]*flight.State, rep *VerifyReport) error {
	topic := cfg.SchdTopic
	recs, err := kafkaread.All(ctx, brokers, topic)
	if err != nil {
		return fmt.Errorf("msgx verify: read %s: %w", topic, err)
	}
	rep.SchdRecords = len(recs)
	last := make(map[string]kafkaread.Record)
	lastVersion := make(map[string]int64)
	for _, r := range recs {
		v, _ := strconv.ParseInt(r.Headers["msgx-state-version"], 10, 64)
		if v < lastVersion[r.Key] {
			rep.add("%s: FLID %s version went back from %d to %d", topic, r.Key, lastVersion[r.Key], v)
		}
		lastVersion[r.Key] = v
		last[r.Key] = r
	}
	for _, flid := range slices.Sorted(maps.Keys(flights)) {
		s := flights[flid]
		r, ok := last[flid]
		switch {
		case !ok:
			rep.add("%s: no record for FLID %s", topic, flid)
		case lastVersion[flid] != s.Version:
			rep.add("%s: FLID %s last version %d, store has %d", topic, flid, lastVersion[flid], s.Version)
		case s.Status == flight.Deleted && r.Value != nil:
			rep.add("%s: FLID %s is DELETED but its last record is not a tombstone", topic, flid)
		case s.Status != flight.Deleted && !bytes.Equal(r.Value, flight.Document(s, flight.Children(s, flights), cfg.Flight.MessageLocation())):
			rep.add("%s: FLID %s last record differs from the store's state document", topic, flid)
		}
		delete(last, flid)
	}
	for flid := range last {
		rep.add("%s: records for FLID %s, which is not in the store", topic, flid)
	}
	return nil
}

// Settled reports whether a run has finished everything owed for the first
// rows mailbox rows: at least that many rows exist, every one has its
// processing mark, and no change notice or latest state is left to deliver.
// Tests, the crash harness and the benchmark wait on it.
func Settled(ctx context.Context, store *relaypgx.Driver, mailbox *sql.DB, rows int) (bool, error) {
	var total, unmarked int
	if err := mailbox.QueryRowContext(ctx, mailboxQueries["InboxMarkCounts"]).Scan(&total, &unmarked); err != nil {
		return false, fmt.Errorf("msgx: count mailbox marks: %w", err)
	}
	if total < rows || unmarked > 0 {
		return false, nil
	}
	st, err := store.GetExecutor().OutboxStats(ctx, TargetMsg)
	if err != nil {
		return false, err
	}
	latest, err := store.GetExecutor().LatestStats(ctx, TargetSchd)
	if err != nil {
		return false, err
	}
	return st.Pending == 0 && latest.Pending == 0, nil
}
