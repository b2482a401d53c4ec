package route

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"time"

	"context"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("route/queries.sql", queriesSQL, "AttemptIDs", "AttemptsInsert", "AttemptsDelete")

// Where the gateway commands go: the engine outbox target whose dispatcher
// publishes them, and the Redis stream it publishes to (the stream the
// gateway reads).
const (
	Target = "sms-submit"
	Stream = "sms:submit"
)

// Receipt modes of a channel (sms_channel.receipt_mode).
const (
	// PerSegment: the supplier reports every segment; a message is
	// delivered when every segment is.
	PerSegment = "per_segment"
	// MessageLevel: one report stands for the whole message; the chain
	// asks for it on the last segment only.
	MessageLevel = "message_level"
)

// Attempt is one try to deliver a message's text to one of its numbers
// through one channel: an sms_attempt row and one submit per segment.
type Attempt struct {
	MessageID   int64
	Recipient   int // index into the message's numbers
	AttemptNo   int // 1 for the first; n+1 for the retry of attempt n
	RetryOf     int64
	AppID       int64
	SignatureID int64
	Number      string // normalised, 11 digits
	Text        string // the text as sent: 【signature】 then the body
	MsgFmt      cmpp.MsgFmt
	Channel     *rules.Channel
	SrcID       string // the channel's Src_Id with the signature's extension

	// Set by Write.
	ID       int64
	Segments []cmpp.Segment
}

// SubmitID is the gateway's submitId of segment pk (from 1) of attempt
// id: id × 256 + pk. A segment number is at most 255, so the ids of two
// attempts never meet, and a submitId names its attempt without a lookup.
func SubmitID(attempt int64, pk int) uint64 { return uint64(attempt)<<8 | uint64(pk) }

// AttemptOf is the attempt of a submitId.
func AttemptOf(submitID uint64) (attempt int64, pk int) {
	return int64(submitID >> 8), int(submitID & 0xff)
}

// Options tune Write.
type Options struct {
	// RequireConnected refuses channels whose connection state is not
	// connected (the re-check in SQL; rules.RouteOpts does the same for
	// the choice).
	RequireConnected bool
}

// Write writes atts in tx: it allocates their ids (one round trip),
// splits each text into its segments (the UDH reference is the attempt
// id's low bits), and inserts the attempts and their submits with the
// re-check of AttemptsInsert (one round trip). It returns the attempts
// written, with ID and Segments set, and those the re-check refused — a
// channel or signature registration switched off, an app or enterprise
// suspended since the batch's snapshot was taken. An error leaves tx to be
// rolled back.
func Write(ctx context.Context, tx pgx.Tx, atts []*Attempt, now time.Time, opts Options) (written, refused []*Attempt, err error) {
	if len(atts) == 0 {
		return nil, nil, nil
	}
	rows, err := tx.Query(ctx, stmts["AttemptIDs"], len(atts))
	if err != nil {
		return nil, nil, fmt.Errorf("sms route: allocate attempt ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, fmt.Errorf("sms route: allocate attempt ids: %w", err)
	}
	if len(ids) != len(atts) {
		return nil, nil, fmt.Errorf("sms route: allocate attempt ids: %d of %d", len(ids), len(atts))
	}
	n := len(atts)
	var (
		aID, aMsg, aRetry, aChan, aApp, aSig = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		aRecip, aNo, aSegs                   = make([]int16, n), make([]int16, n), make([]int16, n)
		aMode                                = make([]string, n)
		sID, sAtt, sChan                     []int64
		sPk                                  []int16
		sReg                                 []bool
	)
	byID := make(map[int64]*Attempt, n)
	for i, a := range atts {
		a.ID = ids[i]
		id := a.ID
		if err := Split(a); err != nil {
			return nil, nil, err
		}
		segs := a.Segments
		byID[id] = a
		aID[i], aMsg[i], aRetry[i], aChan[i], aApp[i], aSig[i] = id, a.MessageID, a.RetryOf, a.Channel.ID, a.AppID, a.SignatureID
		aRecip[i], aNo[i], aSegs[i], aMode[i] = int16(a.Recipient), int16(a.AttemptNo), int16(len(segs)), a.Channel.ReceiptMode
		for k := range segs {
			sID = append(sID, int64(SubmitID(id, k+1)))
			sAtt, sChan = append(sAtt, id), append(sChan, a.Channel.ID)
			sPk, sReg = append(sPk, int16(k+1)), append(sReg, registered(a.Channel.ReceiptMode, k+1, len(segs)))
		}
	}
	rows, err = tx.Query(ctx, stmts["AttemptsInsert"], aID, aMsg, aRecip, aNo, aRetry, aChan, aMode, aSegs, aApp, aSig,
		now, opts.RequireConnected, sID, sAtt, sChan, sPk, sReg)
	if err != nil {
		return nil, nil, fmt.Errorf("sms route: write attempts: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, fmt.Errorf("sms route: write attempts: %w", err)
	}
	ok := make(map[int64]bool, len(got))
	for _, id := range got {
		ok[id] = true
	}
	for _, a := range atts {
		if ok[a.ID] {
			written = append(written, a)
		} else {
			refused = append(refused, a)
		}
	}
	return written, refused, nil
}

// Split sets a.Segments: a.Text coded as a.MsgFmt and cut by cmpp.Split,
// the UDH reference taken from a.ID — so splitting an attempt again (to
// publish its commands again) gives the same segments.
func Split(a *Attempt) error {
	id := a.ID
	segs, err := cmpp.Split(a.Text, a.MsgFmt, cmpp.SplitOpts{RefFunc: func() uint16 { return uint16(id) }})
	if err != nil {
		return fmt.Errorf("sms route: message %d: split: %w", a.MessageID, err)
	}
	a.Segments = segs
	return nil
}

// Delete takes back, in tx, the attempts Write wrote for messages that
// were refused later in the same transaction.
func Delete(ctx context.Context, tx pgx.Tx, messages []int64) error {
	if len(messages) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, stmts["AttemptsDelete"], messages); err != nil {
		return fmt.Errorf("sms route: take back attempts: %w", err)
	}
	return nil
}

// registered says whether segment pk of total asks for a status report:
// every segment on a per-segment channel, the last one on a message-level
// channel.
func registered(mode string, pk, total int) bool {
	return mode != MessageLevel || pk == total
}

// Commands returns the gateway commands of a written attempt, one per
// segment.
func Commands(a *Attempt) []gateway.Command {
	out := make([]gateway.Command, len(a.Segments))
	for k, s := range a.Segments {
		var reg uint8
		if registered(a.Channel.ReceiptMode, k+1, len(a.Segments)) {
			reg = 1
		}
		out[k] = gateway.Command{SubmitID: SubmitID(a.ID, k+1), Channel: a.Channel.Name, SrcID: a.SrcID,
			ServiceID: a.Channel.ServiceID, Dests: []string{a.Number}, MsgFmt: a.MsgFmt, Content: s.Content,
			TPUDHI: s.TPUDHI, PkTotal: s.PkTotal, PkNumber: s.PkNumber, RegisteredDelivery: reg}
	}
	return out
}

// Events returns the outbox events of written attempts' commands: target
// Target, topic stream (the command stream the gateway reads; "" is
// Stream), key the channel (one channel's commands reach the
// stream in commit order), id "cmd:<submitId>", the payload
// gateway.Command.Payload. Append them last in the transaction: the
// outbox key row of each channel is locked from the append to the commit.
func Events(atts []*Attempt, stream string) []*relay.OutboxEvent {
	if stream == "" {
		stream = Stream
	}
	var out []*relay.OutboxEvent
	for _, a := range atts {
		for _, c := range Commands(a) {
			out = append(out, &relay.OutboxEvent{ID: "cmd:" + strconv.FormatUint(c.SubmitID, 10), Target: Target,
				Topic: stream, Key: c.Channel, Payload: c.Payload()})
		}
	}
	slices.SortStableFunc(out, func(a, b *relay.OutboxEvent) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
}

// Choose picks the channel of an attempt among a plan's candidates,
// leaving out the channels in tried (a retry goes elsewhere): the first
// tier of what is left, by weight, deterministically from key (rules.Pick).
// ok is false when no candidate is left.
func Choose(cands []rules.Candidate, tried []int64, key uint64) (rules.Candidate, bool) {
	left := cands
	if len(tried) > 0 {
		left = make([]rules.Candidate, 0, len(cands))
		for _, c := range cands {
			if !slices.Contains(tried, c.ChannelID) {
				left = append(left, c)
			}
		}
	}
	i := rules.Pick(left, key)
	if i < 0 {
		return rules.Candidate{}, false
	}
	return left[i], true
}
