package gateway

import (
	"context"
	"embed"
	"errors"
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

var stmts = sqlfile.MustParse("gateway/queries.sql", queriesSQL, "Claim", "Load", "Settle")

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

// claim claims submitID for consumer at now (microseconds, as stored). It
// returns claimed false when the row exists in a state other than NOT_SENT.
func (s store) claim(ctx context.Context, submitID uint64, channel, consumer string, now time.Time) (bool, error) {
	var at time.Time
	err := s.q.QueryRow(ctx, stmts["Claim"], strconv.FormatUint(submitID, 10), channel, consumer, now).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("gateway: claim submit %d: %w", submitID, err)
	}
	return true, nil
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

// settle moves the claim (consumer, claimedAt) of r.SubmitID to r.State. It
// returns false when the row no longer holds that claim.
func (s store) settle(ctx context.Context, r Row, consumer string, claimedAt, now time.Time) (bool, error) {
	msgID := ""
	if r.MsgID != 0 {
		msgID = strconv.FormatUint(r.MsgID, 10)
	}
	tag, err := s.q.Exec(ctx, stmts["Settle"], strconv.FormatUint(r.SubmitID, 10), string(r.State), msgID, r.Result,
		consumer, claimedAt, now)
	if err != nil {
		return false, fmt.Errorf("gateway: settle submit %d as %s: %w", r.SubmitID, r.State, err)
	}
	return tag.RowsAffected() == 1, nil
}
