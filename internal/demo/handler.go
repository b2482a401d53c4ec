// Package demo is the pipeline `relay demo` runs: a foreign SQLite table with
// generated messages and deliberate holes (some filled late), watermark intake,
// global FIFO processing with a handler that keeps a small projection, and a
// reconciliation of every row at the end. It is an app on the engine like msgx
// or sms, only small: it shows what the engine guarantees and checks it.
package demo

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Line is the demo's migration line name.
const Line = "demo"

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

//go:embed source.sql
var sourceSQL string

var queries = sqlfile.MustParse("demo/queries.sql", queriesSQL,
	"ProjectionLastID", "ProjectionUpsert", "ProjectionSummary", "ProjectionRows")

var sourceQueries = sqlfile.MustParse("demo/source.sql", sourceSQL,
	"SourceCreate", "SourceInsert", "SourceIDs", "SourceAddMark", "SourceAddMarkTime", "SourceUnmarked", "SourceMarks")

// MigrationLine returns the demo's migration line for a store dialect
// ("postgres" or "sqlite", relaydriver.Driver.Name).
func MigrationLine(dialect string) (relaymigrate.Line, error) {
	sub, err := fs.Sub(migrationFS, "migration/"+dialect)
	if err != nil {
		return relaymigrate.Line{}, err
	}
	if _, err := fs.Stat(sub, Line); err != nil {
		return relaymigrate.Line{}, fmt.Errorf("demo: no migrations for store %q", dialect)
	}
	return relaymigrate.Line{Name: Line, FS: sub}, nil
}

// IgnoreRules are the ignore rules the demo pipeline runs with (seed 000 §2:
// TYPE-STYP or TYPE-*, case-insensitive).
var IgnoreRules = []string{"LDM-*", "REGN-*"}

// Kinds the generator writes.
const (
	kindUpdate = "FLOP-UPDT" // applied to the projection
	kindFlaky  = "FLOP-FLKY" // fails once with INFRA, then applies: shows backoff holding the FIFO head
	kindLDM    = "LDM-INFO"  // ignored by LDM-*
	kindRegn   = "regn-chg"  // ignored by REGN-* (case-insensitive)
)

// record is a decoded demo message: KIND|IDENTITY|KEY|VALUE.
type record struct {
	kind, identity, key string
	value               int64
}

// Handler is the demo handler. Decode parses "KIND|IDENTITY|KEY|VALUE" outside
// the transaction (a bad payload is MALFORMED: DEAD at once, never retried);
// Handle adds VALUE to the key's projection row in the engine's transaction and
// checks that the key's messages arrive in id order — a FIFO violation would
// make the message DEAD(PROTOCOL) and fail the reconciliation.
type Handler struct {
	// Queue scopes the projection rows.
	Queue string
	// Target, when set, is the outbox target the handler appends one change
	// event to per applied message, in the same transaction (seed 000 §8.1).
	Target string
	// MaxPayload is the largest payload Decode reads, in bytes (<= 0:
	// MaxPayloadDefault); a larger one is MALFORMED (ErrTooLarge) unread.
	MaxPayload int
}

// MaxPayloadDefault is the default Handler.MaxPayload: 4 KiB, a hundred times
// the demo's own messages.
const MaxPayloadDefault = 4 << 10

// ErrTooLarge is wrapped by the MALFORMED error of a payload over
// Handler.MaxPayload.
var ErrTooLarge = errors.New("demo: payload too large")

// EventTopic is the topic the demo's change events go to.
const EventTopic = "demo"

var _ relay.Decoder = (*Handler)(nil)

// Decode parses the payload. Its errors quote at most
// relaytype.MaxQuotedValue bytes of a field.
func (h *Handler) Decode(_ context.Context, m *relaytype.Message) (*relay.Decoded, error) {
	rec, err := parse(m.Payload, cmp.Or(max(h.MaxPayload, 0), MaxPayloadDefault))
	if err != nil {
		return nil, relay.Classify(relaytype.ClassMalformed, err)
	}
	return &relay.Decoded{Identity: rec.identity, Kind: rec.kind, Value: rec}, nil
}

// parse reads a payload of at most maxSize bytes; the size is checked before
// anything is copied.
func parse(payload []byte, maxSize int) (record, error) {
	switch {
	case len(payload) == 0:
		return record{}, errors.New("demo: raw content missing")
	case len(payload) > maxSize:
		return record{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), maxSize)
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 4 {
		return record{}, fmt.Errorf("demo: payload has %d fields, want 4 (KIND|IDENTITY|KEY|VALUE)", len(parts))
	}
	v, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		// strconv's error quotes the whole field; keep only its reason.
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err
		}
		return record{}, fmt.Errorf("demo: VALUE %s is not an integer: %w", relaytype.QuoteValue(parts[3]), err)
	}
	if parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return record{}, errors.New("demo: KIND, IDENTITY and KEY must not be empty")
	}
	return record{kind: parts[0], identity: parts[1], key: parts[2], value: v}, nil
}

// Handle applies one message to the projection.
func (h *Handler) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	rec, ok := d.Decoded.Value.(record)
	if !ok {
		return relay.Dead(relaytype.ClassProtocol, errors.New("demo: message was not decoded"))
	}
	if rec.kind == kindFlaky && d.Message.Attempts == 0 {
		return relay.Retry(relaytype.ClassInfra, errors.New("demo: simulated transient failure on the first attempt"))
	}
	var last int64
	err := tx.QueryRow(ctx, queries["ProjectionLastID"], h.Queue, rec.key).Scan(&last)
	switch {
	case errors.Is(err, relaytype.ErrNotFound):
	case err != nil:
		return relay.Retry(relaytype.ClassInfra, fmt.Errorf("demo: read projection: %w", err))
	case last >= d.Message.ID:
		return relay.Dead(relaytype.ClassProtocol, fmt.Errorf("demo: order violated: message %d after %d for one key", d.Message.ID, last))
	}
	if _, err := tx.Exec(ctx, queries["ProjectionUpsert"], h.Queue, rec.key, rec.value, d.Message.ID); err != nil {
		return relay.Retry(relaytype.ClassInfra, fmt.Errorf("demo: write projection: %w", err))
	}
	if h.Target != "" {
		ev := &relay.OutboxEvent{ID: fmt.Sprintf("%s-%d", h.Queue, d.Message.ID), Target: h.Target,
			Topic: EventTopic, Key: rec.key, Payload: []byte(strconv.FormatInt(rec.value, 10))}
		if _, err := relay.AppendEventsTx(ctx, tx, ev); err != nil {
			return relay.Retry(relaytype.ClassInfra, fmt.Errorf("demo: append event: %w", err))
		}
	}
	return relay.Succeeded()
}
