package relaypgx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayhq/relay/relaytype"
)

// PostgreSQL SQLSTATE codes the driver maps.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014" // statement_timeout
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeTooManyConnections   = "53300"
)

// mapErr translates a pgx error into the relaytype sentinels, keeping the
// original in the chain. op names the operation for the message.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("relaypgx: %s: %w", op, relaytype.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == codeUniqueViolation:
			return fmt.Errorf("relaypgx: %s: %w: %w", op, relaytype.ErrConflict, err)
		case transientCode(pgErr.Code):
			return fmt.Errorf("relaypgx: %s: %w: %w", op, relaytype.ErrTransient, err)
		}
		return fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if isTransient(err) {
		return fmt.Errorf("relaypgx: %s: %w: %w", op, relaytype.ErrTransient, err)
	}
	return fmt.Errorf("relaypgx: %s: %w", op, err)
}

func transientCode(code string) bool {
	switch code {
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable, codeQueryCanceled,
		codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
		return true
	}
	// Class 08: connection exception.
	return strings.HasPrefix(code, "08")
}

// isTransient reports infrastructure failures that are worth retrying: a
// request that never reached the server, a timeout, a lost connection. A
// caller's own cancellation (context.Canceled) is not transient.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) && !pgconn.Timeout(err) {
		return false
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
