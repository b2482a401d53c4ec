package shore

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// ApplyQueue is the engine queue the inbox releases events to: per key
// (ApplyKey), in source order, processed by the shore's applier.
const ApplyQueue = "shipsync-apply"

// UrgentApplyQueue is ApplyQueue for the rules named by
// Inbox.SetUrgentRules: processed by the same applier with workers of its
// own.
const UrgentApplyQueue = "shipsync-apply-urgent"

// ApplyKey is the engine ordering key of a record: its rule and the SHA-256
// of its primary key. seed 004 §10.4: one rule_id + primary_key is processed
// serially on the shore, different keys in parallel.
func ApplyKey(rule string, pkHash []byte) string {
	return rule + "/" + hex.EncodeToString(pkHash)
}

// ApplyPayload is the engine payload of a released event: its inbox id.
func ApplyPayload(inboxID int64) []byte { return strconv.AppendInt(nil, inboxID, 10) }

// ParseApplyPayload reads an ApplyPayload.
func ParseApplyPayload(p []byte) (int64, error) {
	id, err := strconv.ParseInt(string(p), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("shore: apply payload is not an inbox id")
	}
	return id, nil
}

// streamKey names one ordered source stream of the sending node.
type streamKey struct{ connector, partition string }

// streamState is a locked stream: the next sequence it waits for and the
// events it holds past a gap (by sequence).
type streamState struct {
	next uint64
	held map[uint64]heldEvent
	// heldCount is the stream's held count as stored (len(held) once read).
	heldCount int
}

// heldEvent is an event stored earlier and not yet released, or (skip) a
// sequence number given up earlier that the stream has not passed yet.
type heldEvent struct {
	id     int64
	rule   string
	pkHash []byte
	skip   bool
}

// burnedSeqs are the sequence numbers of one stream that this batch gives
// up (seq → the refused event's id): valid, numbered events refused for
// good, so no event will be stored under them.
type burnedSeqs map[uint64]string

// chain returns the sequences released by walking from next over the
// sequences in have (contiguous ones only), and the new next.
func chain(next uint64, have func(uint64) bool) (released []uint64, newNext uint64) {
	for have(next) {
		released = append(released, next)
		next++
	}
	return released, next
}

// releasable walks st from its next sequence over mine (this batch's
// inserted events by sequence), burned (this batch's given-up numbers) and
// its held events and given-up numbers: the sequences now contiguous, and
// the new next.
func (st *streamState) releasable(mine map[uint64]int, burned burnedSeqs) (released []uint64, next uint64) {
	return chain(st.next, func(s uint64) bool {
		_, ok := mine[s]
		if !ok {
			_, ok = burned[s]
		}
		if !ok {
			_, ok = st.held[s]
		}
		return ok
	})
}

// bySequence maps the queued events that keep accepts to their batch
// positions, per stream and sequence (the first of equal sequences).
func bySequence(queued []int, rows []*inboxRow, keep func(i int) bool) map[streamKey]map[uint64]int {
	out := map[streamKey]map[uint64]int{}
	for _, i := range queued {
		if !keep(i) {
			continue
		}
		r := rows[i]
		k := streamKey{r.connector, r.partition}
		if out[k] == nil {
			out[k] = map[uint64]int{}
		}
		if _, dup := out[k][r.seq]; !dup {
			out[k][r.seq] = i
		}
	}
	return out
}

// sortStreams sorts keys by connector, then partition: the one lock order.
func sortStreams(keys []streamKey) {
	slices.SortFunc(keys, func(a, b streamKey) int {
		return cmp.Or(strings.Compare(a.connector, b.connector), strings.Compare(a.partition, b.partition))
	})
}

// lockStreams creates and locks the streams of the sender's events to
// receive (sorted, so concurrent batches lock in one order) and reads the
// held events it needs: all of a stream's when the batch brings the
// sequence the stream waits for (the gap may close and release them), else
// only those at the batch's own sequences (resends) — a stalled stream's
// held events are not read again for every batch past its gap.
func lockStreams(ctx context.Context, tx pgx.Tx, sender string, seqs map[streamKey][]uint64, now time.Time) (map[streamKey]*streamState, error) {
	keys := make([]streamKey, 0, len(seqs))
	for k := range seqs {
		keys = append(keys, k)
	}
	sortStreams(keys)
	cs, ps := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		cs[i], ps[i] = k.connector, k.partition
	}
	rows, err := tx.Query(ctx, stmts["StreamLockMany"], sender, cs, ps, now)
	if err != nil {
		return nil, fmt.Errorf("lock streams: %w", err)
	}
	out := make(map[streamKey]*streamState, len(keys))
	var k streamKey
	var next string
	var held int
	_, err = pgx.ForEachRow(rows, []any{&k.connector, &k.partition, &next, &held}, func() error {
		n, err := strconv.ParseUint(next, 10, 64)
		if err != nil {
			return fmt.Errorf("stream next_sequence %q: %w", next, err)
		}
		out[k] = &streamState{next: n, heldCount: held}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock streams: %w", err)
	}
	var whole []streamKey
	for _, k := range keys {
		st := out[k]
		switch {
		case st.heldCount == 0:
		case slices.Contains(seqs[k], st.next):
			whole = append(whole, k)
		default:
			at := make([]string, len(seqs[k]))
			for i, s := range seqs[k] {
				at[i] = strconv.FormatUint(s, 10)
			}
			rows, err := tx.Query(ctx, stmts["StreamHeldAt"], sender, k.connector, k.partition, at)
			if err != nil {
				return nil, fmt.Errorf("held events: %w", err)
			}
			if err := readHeld(rows, out); err != nil {
				return nil, err
			}
		}
	}
	if len(whole) == 0 {
		return out, nil
	}
	cs, ps = cs[:0], ps[:0]
	for _, k := range whole {
		cs, ps = append(cs, k.connector), append(ps, k.partition)
	}
	rows, err = tx.Query(ctx, stmts["StreamHeld"], sender, cs, ps)
	if err != nil {
		return nil, fmt.Errorf("held events: %w", err)
	}
	return out, readHeld(rows, out)
}

// readHeld adds the held events of rows (StreamHeld's columns) to their
// streams.
func readHeld(rows pgx.Rows, out map[streamKey]*streamState) error {
	var k streamKey
	var h heldEvent
	var seq string
	_, err := pgx.ForEachRow(rows, []any{&k.connector, &k.partition, &h.id, &seq, &h.rule, &h.pkHash}, func() error {
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			return fmt.Errorf("held source_sequence %q: %w", seq, err)
		}
		st := out[k]
		if st.held == nil {
			st.held = map[uint64]heldEvent{}
		}
		if h.id == 0 { // a given-up number (StreamHeld)
			if _, event := st.held[n]; !event {
				st.held[n] = heldEvent{skip: true}
			}
			return nil
		}
		st.held[n] = heldEvent{id: h.id, rule: h.rule, pkHash: slices.Clone(h.pkHash)}
		return nil
	})
	if err != nil {
		return fmt.Errorf("held events: %w", err)
	}
	return nil
}

// releaseEvent is an event handed to processing, in its stream's order.
type releaseEvent struct {
	inboxID int64
	key     string
	rule    string
}

// settleStreams runs after the batch's events are inserted (inserted maps a
// queued event's position in the batch to its inbox id; seq and stream give
// each queued event's sequence and stream). It releases every event that is
// now contiguous — new ones and ones held before — enqueueing them to
// ApplyQueue in stream order, corrects released_at where the insert's guess
// (pre, the events inserted as released) was wrong, and stores each stream's
// new state.
func (in *Inbox) settleStreams(ctx context.Context, tx pgx.Tx, sender string, streams map[streamKey]*streamState,
	queued []int, rows []*inboxRow, inserted map[int]int64, pre map[int]bool, burns map[streamKey]burnedSeqs, now time.Time) error {
	// The inserted events of each stream, by sequence.
	bySeq := bySequence(queued, rows, func(i int) bool { _, ok := inserted[i]; return ok })
	var fixIDs []int64
	var fixRel []bool
	var release []releaseEvent
	var cs, ps, ns []string
	var hs []int32
	var skips skipColumns
	var passed skipColumns
	keys := make([]streamKey, 0, len(streams))
	for k := range streams {
		keys = append(keys, k)
	}
	sortStreams(keys)
	heldAt := make(map[streamKey]int, len(keys))
	for _, k := range keys {
		st := streams[k]
		mine := bySeq[k]
		burned := usableBurns(st, mine, burns[k])
		seqs, next := st.releasable(mine, burned)
		released := make(map[int]bool, len(seqs))
		for _, s := range seqs {
			if e, ok := burned[s]; ok {
				skips.add(k, s, e, true)
				delete(burned, s)
				continue
			}
			if i, ok := mine[s]; ok {
				released[i] = true
				release = append(release, releaseEvent{inboxID: inserted[i], key: ApplyKey(rows[i].rule, rows[i].pkHash),
					rule: rows[i].rule})
				if !pre[i] {
					fixIDs, fixRel = append(fixIDs, inserted[i]), append(fixRel, true)
				}
				continue
			}
			h := st.held[s]
			delete(st.held, s)
			st.heldCount--
			if h.skip {
				passed.add(k, s, "", true)
				continue
			}
			release = append(release, releaseEvent{inboxID: h.id, key: ApplyKey(h.rule, h.pkHash), rule: h.rule})
			fixIDs, fixRel = append(fixIDs, h.id), append(fixRel, true)
		}
		// st.held may be only part of what the stream holds (lockStreams);
		// heldCount is the whole.
		held := st.heldCount
		for s, i := range mine {
			switch {
			case released[i]:
			case s < st.next:
				// Below the stream's next sequence yet new: its number was
				// freed (the earlier event is gone from the inbox). Nothing
				// can come before it any more, so it is released now.
				release = append(release, releaseEvent{inboxID: inserted[i], key: ApplyKey(rows[i].rule, rows[i].pkHash),
					rule: rows[i].rule})
				if !pre[i] {
					fixIDs, fixRel = append(fixIDs, inserted[i]), append(fixRel, true)
				}
			default:
				held++
				if pre[i] {
					// Guessed contiguous, but an event before it was not
					// inserted after all: held.
					fixIDs, fixRel = append(fixIDs, inserted[i]), append(fixRel, false)
				}
			}
		}
		for s, e := range burned { // past the gap: waits for it, like a held event
			skips.add(k, s, e, false)
		}
		heldAt[k] = len(hs)
		cs, ps = append(cs, k.connector), append(ps, k.partition)
		ns, hs = append(ns, strconv.FormatUint(next, 10)), append(hs, int32(held))
	}
	if len(skips.c) > 0 {
		// A number given up before (a resend of its refused event) is not
		// recorded again; only the new waiting ones count as held.
		rows, err := tx.Query(ctx, stmts["SkipInsertMany"], sender, now, skips.c, skips.p, skips.s, skips.e,
			skips.r, skips.passed)
		if err != nil {
			return fmt.Errorf("record given-up sequence numbers: %w", err)
		}
		var k streamKey
		var waiting bool
		if _, err := pgx.ForEachRow(rows, []any{&k.connector, &k.partition, &waiting}, func() error {
			if waiting {
				hs[heldAt[k]]++
			}
			return nil
		}); err != nil {
			return fmt.Errorf("record given-up sequence numbers: %w", err)
		}
	}
	if len(passed.c) > 0 {
		if _, err := tx.Exec(ctx, stmts["SkipPass"], sender, now, passed.c, passed.p, passed.s); err != nil {
			return fmt.Errorf("pass given-up sequence numbers: %w", err)
		}
	}
	if len(fixIDs) > 0 {
		if _, err := tx.Exec(ctx, stmts["EventRelease"], fixIDs, fixRel, now); err != nil {
			return fmt.Errorf("release held events: %w", err)
		}
	}
	if len(cs) > 0 {
		if _, err := tx.Exec(ctx, stmts["StreamUpdateMany"], sender, cs, ps, ns, now, hs); err != nil {
			return fmt.Errorf("update streams: %w", err)
		}
	}
	if len(release) == 0 {
		return nil
	}
	var params, urgent []*relay.EnqueueParams
	for _, r := range release {
		p := &relay.EnqueueParams{Key: r.key, Payload: ApplyPayload(r.inboxID)}
		if in.urgent[r.rule] {
			urgent = append(urgent, p)
		} else {
			params = append(params, p)
		}
	}
	for _, q := range []struct {
		e  *relay.Engine
		ps []*relay.EnqueueParams
	}{{in.engine, params}, {in.urgentEngine, urgent}} {
		if len(q.ps) == 0 {
			continue
		}
		if _, err := q.e.EnqueueTx(ctx, in.d.WrapTx(tx), q.ps...); err != nil {
			return fmt.Errorf("enqueue released events: %w", err)
		}
	}
	return nil
}

// guessReleased marks the queued events that will be released if every one
// of them is inserted: those contiguous from their stream's next sequence
// over the batch's and the held events. settleStreams corrects the guess.
func guessReleased(streams map[streamKey]*streamState, queued []int, rows []*inboxRow, burns map[streamKey]burnedSeqs) map[int]bool {
	bySeq := bySequence(queued, rows, func(int) bool { return true })
	pre := make(map[int]bool, len(queued))
	for k, st := range streams {
		mine := bySeq[k]
		seqs, _ := st.releasable(mine, usableBurns(st, mine, burns[k]))
		for _, s := range seqs {
			if i, ok := mine[s]; ok {
				pre[i] = true
			}
		}
	}
	return pre
}

// usableBurns returns the numbers of burned that the stream may give up: not
// below its next sequence (passed already), not the number of an event of
// the batch or one it holds (taken by another event), not one given up
// before (held as a skip: that record stands). The result is a copy.
func usableBurns(st *streamState, mine map[uint64]int, burned burnedSeqs) burnedSeqs {
	out := make(burnedSeqs, len(burned))
	for s, e := range burned {
		if s < st.next {
			continue
		}
		if _, taken := mine[s]; taken {
			continue
		}
		if _, held := st.held[s]; held {
			continue
		}
		out[s] = e
	}
	return out
}

// skipColumns holds the SkipInsertMany / SkipPass arrays.
type skipColumns struct {
	c, p, s, e, r []string
	passed        []bool
}

func (k *skipColumns) add(st streamKey, seq uint64, eventID string, passed bool) {
	k.c, k.p = append(k.c, st.connector), append(k.p, st.partition)
	k.s, k.e = append(k.s, strconv.FormatUint(seq, 10)), append(k.e, eventID)
	k.r, k.passed = append(k.r, pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED.String()), append(k.passed, passed)
}
