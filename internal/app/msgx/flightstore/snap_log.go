package flightstore

import (
	"context"
	"fmt"
	"time"
)

// SnapLogEntry is one SCHD_SNAP_LOG row: the trace of one SCHD package
// (DNLD or RESP) processed (seed 000 §7.1). It is append-only and never
// consulted by decisions.
type SnapLogEntry struct {
	// MsgID is the mailbox id (CMINMSGS.ID) of the package.
	MsgID int64
	// Kind is the package's kind, e.g. "SCHD-DNLD" or "SCHD-RESP"; required.
	Kind string
	// Identity is the message's business identity; "" (NULL) when unknown.
	Identity string
	// Records is the record count the package declared or carried; Applied
	// how many flights it wrote.
	Records int
	Applied int
	// Outcome is what happened (e.g. APPLIED, REPLAYED, DEAD); required.
	Outcome string
	// ScopeStart and ScopeEnd are the first and last operating days
	// (YYYYMMDD) the package covered; "" (NULL) when none could be derived.
	ScopeStart, ScopeEnd string
	// RecvAt is when the package was processed (the processing clock); required.
	RecvAt time.Time
}

// AppendSnapLog appends e to SCHD_SNAP_LOG. Seed 000 §7.1 appends it outside
// the processing transaction, after the commit.
func AppendSnapLog(ctx context.Context, q Querier, e *SnapLogEntry) error {
	op := fmt.Sprintf("append snapshot log msg %d", e.MsgID)
	if e.Kind == "" || e.Outcome == "" || e.RecvAt.IsZero() {
		return fmt.Errorf("flightstore: %s: Kind, Outcome and RecvAt are required", op)
	}
	if _, err := q.Exec(ctx, stmts.snapLogAppend, e.MsgID, e.Kind, text(e.Identity), e.Records, e.Applied,
		e.Outcome, text(e.ScopeStart), text(e.ScopeEnd), e.RecvAt); err != nil {
		return mapErr(op, err)
	}
	return nil
}

// PurgeSnapLog deletes at most limit (> 0) SCHD_SNAP_LOG rows, oldest first,
// and returns how many it deleted. Retention is by (SCOPE_END, RECV_AT) (seed
// 000 §9.3): a row goes when it was received before `before` AND the last
// operating day it covers (SCOPE_END; NULL covers none) is before the
// operating day of `before` — before.Format("20060102") in before's own
// location, so pass before in the airport's zone for exact day boundaries —
// so a package received long ago about a day that is not over yet is kept.
func PurgeSnapLog(ctx context.Context, q Querier, before time.Time, limit int) (int, error) {
	return purge(ctx, q, "purge snapshot log", stmts.snapLogPurge, limit, before, before.Format("20060102"), limit)
}
