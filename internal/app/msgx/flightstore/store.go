package flightstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Querier is satisfied by pgx.Tx, *pgx.Conn and *pgxpool.Pool; in a relay
// handler it is the engine's transaction, tx.Unwrap().(pgx.Tx). Functions
// that need a transaction (LockPipeline, LoadWith with LockPipeline,
// ArchiveAndDelete) say so; the others work on any of them (a pgx.Batch
// outside a transaction runs in one implicit transaction, so a
// multi-statement write is still atomic).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Line is the name of the msgx migration line.
const Line = "msgx"

//go:embed migration
var migrationFS embed.FS

// MigrationLine returns the msgx migration line: the embedded files
// migration/msgx/NNN_name.up.sql, PostgreSQL only. Apply it with
// relaymigrate.Up on a relaypgx driver; check it with relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("flightstore: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// Sentinel errors.
var (
	// ErrNoRequest: no REQ_TRACK row in the state the call requires (no open
	// request with that SEQN; a request that is no longer PENDING).
	ErrNoRequest = errors.New("flightstore: no such request")
	// ErrOperationDayChanged: a save would change a flight's non-NULL
	// OPERATION_DAY (INV-12). The pipeline should have rejected the package
	// before saving (INV-19); the transaction is aborted.
	ErrOperationDayChanged = errors.New("flightstore: OPERATION_DAY is immutable once set")
	// ErrStaleVersion: a save would move a flight's STATE_VERSION backwards
	// (INV-13); saving the stored version again is allowed. The transaction is
	// aborted.
	ErrStaleVersion = errors.New("flightstore: STATE_VERSION would move backwards")
)

// LockPipeline takes PIPELINE_LOCK (seed 000 §5.3, INV-18) for the rest of the
// transaction q, waiting while another transaction holds it. Processing
// transactions that change flights and the flight-history cleanup both take
// it, so the cleanup's version re-check and delete never interleave with a
// processing transaction. Re-entrant: taking it again in the same transaction
// returns at once. q must be a transaction (on a pool or a bare connection the
// lock would be released as soon as the statement ends). ctx bounds the wait.
//
// The lock is pg_advisory_xact_lock on a 64-bit key hashed from the current
// schema and the name "msgx:pipeline_lock", rather than a row lock on a
// one-row table: it is held in the lock manager's memory only, so thousands of
// processing transactions per second write no heap tuple lock and no WAL for
// it; it needs no seeded row that a migration or an operator could lose; and
// it is released by the server when the transaction ends, whatever happens to
// the client. Keying by schema keeps deployments (and parallel tests) in
// different schemas of one database independent; pg_locks shows the holder
// (locktype advisory).
func LockPipeline(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, stmts.pipelineLock); err != nil {
		return mapErr("lock pipeline", err)
	}
	return nil
}

// PostgreSQL SQLSTATE codes and constraint names mapErr recognises.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeTooManyConnections   = "53300"

	constraintOperationDay = "flight_schd_operation_day_immutable"
	constraintVersion      = "flight_schd_state_version_monotonic"
)

// mapErr wraps err as "flightstore: op: …", adding the sentinel the driver
// error stands for, and keeps err in the chain.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("flightstore: %s: %w", op, relaytype.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.ConstraintName == constraintOperationDay:
			return fmt.Errorf("flightstore: %s: %w: %w", op, ErrOperationDayChanged, err)
		case pgErr.ConstraintName == constraintVersion:
			return fmt.Errorf("flightstore: %s: %w: %w", op, ErrStaleVersion, err)
		case pgErr.Code == codeUniqueViolation:
			return fmt.Errorf("flightstore: %s: %w: %w", op, relaytype.ErrConflict, err)
		case transientCode(pgErr.Code):
			return fmt.Errorf("flightstore: %s: %w: %w", op, relaytype.ErrTransient, err)
		}
		return fmt.Errorf("flightstore: %s: %w", op, err)
	}
	if isTransient(err) {
		return fmt.Errorf("flightstore: %s: %w: %w", op, relaytype.ErrTransient, err)
	}
	return fmt.Errorf("flightstore: %s: %w", op, err)
}

func transientCode(code string) bool {
	switch code {
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable, codeQueryCanceled,
		codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
		return true
	}
	return strings.HasPrefix(code, "08") // connection exception
}

// isTransient reports failures worth retrying: a request that never reached
// the server, a timeout, a lost connection. The caller's own cancellation is
// not transient.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) && !pgconn.Timeout(err) {
		return false
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// flidOp names the flights of a call in an error: "FLID X" or "FLID X (and n more)".
func flidOp(verb string, flids []string) string {
	switch len(flids) {
	case 0:
		return verb + " no flights"
	case 1:
		return fmt.Sprintf("%s FLID %s", verb, flids[0])
	}
	return fmt.Sprintf("%s FLID %s (and %d more)", verb, flids[0], len(flids)-1)
}
