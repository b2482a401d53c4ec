package gateway

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaymigrate"
)

// Line is the name of the gateway's migration line.
const Line = "sms_gateway"

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("gateway/queries.sql", queriesSQL, "Claim", "Load", "Settle", "Late")

// MigrationLine returns the gateway's migration line (the embedded files
// migration/sms_gateway/NNN_name.up.sql, PostgreSQL only). Apply it with
// relaymigrate.Up on a relaypgx driver; New refuses nothing by itself, the
// CLI checks it with relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("gateway: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// Querier is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// State is the state of a submit in the gateway_submit table.
type State string

// The states. Only StateNotSent may be claimed again.
const (
	// StateClaimed: claimed by a gateway that is submitting it, or that
	// crashed between the claim and the SubmitResp. A claim older than
	// Config.StaleClaim is settled StateUnknown, never resubmitted.
	StateClaimed State = "CLAIMED"
	// StateAccepted: the supplier answered Result 0; MsgID is its Msg_Id.
	StateAccepted State = "ACCEPTED"
	// StateRejected: the supplier refused it (Result other than 0 and 8), or
	// the command was invalid for this gateway (an unknown channel).
	StateRejected State = "REJECTED"
	// StateUnknown: the supplier may have it (cmppconn.OutcomeUnknown, or a
	// claim never settled). Never resubmitted by the gateway.
	StateUnknown State = "UNKNOWN"
	// StateNotSent: nothing reached the supplier (cmppconn.OutcomeNotSent
	// or flow control); the command stays pending and is claimed again.
	StateNotSent State = "NOT_SENT"
)

// Row is one gateway_submit row.
type Row struct {
	SubmitID  uint64
	Channel   string
	State     State
	MsgID     uint64 // 0 when none
	Result    string
	ClaimedBy string
	ClaimedAt time.Time
}

// store is the hand-written query layer over gateway_submit.
type store struct{ q Querier }

// claim claims ids (ascending, no repeats) with their channels for consumer
// at now (microseconds, as stored) and returns the ids it claimed: those
// without a row or left NOT_SENT.
func (s store) claim(ctx context.Context, ids []uint64, channels []string, consumer string, now time.Time) (map[uint64]bool, error) {
	return s.ids(ctx, "claim", stmts["Claim"], decimals(ids), channels, consumer, now)
}

// ids runs a statement returning submit ids as decimal text.
func (s store) ids(ctx context.Context, what, sql string, args ...any) (map[uint64]bool, error) {
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %s: %w", what, err)
	}
	defer rows.Close()
	got := map[uint64]bool{}
	var text string
	for rows.Next() {
		if err := rows.Scan(&text); err != nil {
			return nil, fmt.Errorf("gateway: %s: %w", what, err)
		}
		id, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s: submit id %q: %w", what, text, err)
		}
		got[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("gateway: %s: %w", what, err)
	}
	return got, nil
}

func decimals(ids []uint64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatUint(id, 10)
	}
	return out
}

// load reads submitID's row.
func (s store) load(ctx context.Context, submitID uint64) (Row, error) {
	r := Row{SubmitID: submitID}
	var state, msgID string
	err := s.q.QueryRow(ctx, stmts["Load"], strconv.FormatUint(submitID, 10)).
		Scan(&r.Channel, &state, &msgID, &r.Result, &r.ClaimedBy, &r.ClaimedAt)
	if err != nil {
		return r, fmt.Errorf("gateway: load submit %d: %w", submitID, err)
	}
	r.State = State(state)
	if msgID != "" {
		if r.MsgID, err = strconv.ParseUint(msgID, 10, 64); err != nil {
			return r, fmt.Errorf("gateway: load submit %d: msg_id: %w", submitID, err)
		}
	}
	return r, nil
}

// settle moves the claims (consumer, claimedAt) of rows to their State,
// MsgID and Result, at now, and returns the ids settled: a row that no
// longer holds that claim is left as it is and not returned.
func (s store) settle(ctx context.Context, rows []Row, consumer string, claimedAt, now time.Time) (map[uint64]bool, error) {
	ids, states, msgIDs, results := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		ids[i], states[i], results[i] = strconv.FormatUint(r.SubmitID, 10), string(r.State), r.Result
		if r.MsgID != 0 {
			msgIDs[i] = strconv.FormatUint(r.MsgID, 10)
		}
	}
	return s.ids(ctx, "settle", stmts["Settle"], ids, states, msgIDs, results, consumer, claimedAt, now)
}

// late records a SubmitResp that came after submitID was settled UNKNOWN.
func (s store) late(ctx context.Context, submitID uint64, channel string, msgID uint64, result uint32, at time.Time) error {
	_, err := s.q.Exec(ctx, stmts["Late"], strconv.FormatUint(submitID, 10), channel, strconv.FormatUint(msgID, 10),
		int64(result), at)
	if err != nil {
		return fmt.Errorf("gateway: record late response of submit %d: %w", submitID, err)
	}
	return nil
}
