package relaysqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/relayhq/relay/relaytype"
)

// mapErr maps a database error to the relaytype sentinels at the boundary,
// keeping the original error in the chain: sql.ErrNoRows → ErrNotFound;
// a UNIQUE or PRIMARY KEY violation → ErrConflict; SQLITE_BUSY / SQLITE_LOCKED
// and context.DeadlineExceeded → ErrTransient. Other constraint failures
// (CHECK, NOT NULL) are bugs, not conflicts, and stay plain errors, as in
// relaypgx. op names the operation in the message. A nil err stays nil.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrNotFound)
	}
	if isUniqueViolation(err) {
		return fmt.Errorf("relaysqlite: %s: %w: %w", op, relaytype.ErrConflict, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // primary result code; Code() is the extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("relaysqlite: %s: %w: %w", op, relaytype.ErrTransient, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A timeout is worth retrying; the caller's own cancellation is not.
		return fmt.Errorf("relaysqlite: %s: %w: %w", op, relaytype.ErrTransient, err)
	}
	return fmt.Errorf("relaysqlite: %s: %w", op, err)
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
