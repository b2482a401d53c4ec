package relaysqlite

import (
	"database/sql"
	"time"
)

// Times are stored as INTEGER Unix microseconds UTC: numeric comparisons are
// correct, precision matches PostgreSQL's timestamptz, and the zero time.Time
// is NULL. These helpers are the only place the representation is known.

// timeArg converts t to a bind argument: nil for the zero time, else Unix
// microseconds (sub-microsecond digits are truncated, as pgx does).
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// timeOf converts a scanned column back: NULL is the zero time, anything else
// a UTC time.
func timeOf(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// boolArg is a boolean as SQLite stores it: 1 or 0, for arithmetic in SQL.
func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
