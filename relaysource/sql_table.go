package relaysource

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Dialect names the SQL dialect of a SQLTable's database.
type Dialect string

const (
	// DialectMySQL is MySQL or MariaDB through github.com/go-sql-driver/mysql:
	// identifiers are quoted with backticks.
	DialectMySQL Dialect = "mysql"
	// DialectSQLite is SQLite through modernc.org/sqlite (driver name "sqlite"):
	// identifiers are quoted with double quotes.
	DialectSQLite Dialect = "sqlite"
)

// ReadTimeoutDefault bounds each SQLTable call when SQLTableConfig.ReadTimeout
// is zero.
const ReadTimeoutDefault = 10 * time.Second

// SQLTableConfig describes a foreign table with increasing ids. Identifiers are
// letters, digits and underscore only; they are quoted for the dialect.
type SQLTableConfig struct {
	// Dialect is DialectMySQL or DialectSQLite. Required.
	Dialect Dialect
	// Table is the table name, optionally qualified by one schema
	// ("mailbox.CMINMSGS"). Required.
	Table string
	// IDColumn is the increasing integer id column. Required.
	IDColumn string
	// KeyColumn, when set, fills Row.Key (NULL reads as "").
	KeyColumn string
	// PayloadColumn, when set, fills Row.Payload (NULL reads as nil). Empty means
	// the payload is not copied: the handler reads the raw content from the source
	// at processing time (msgx does, seed 000 §1.2).
	PayloadColumn string
	// ReceivedAtColumn, when set, fills Row.ReceivedAt (NULL, MySQL's zero date
	// and a value that is not a date-time read as the zero time; the last is
	// logged). DATETIME values arrive as time.Time (MySQL
	// with parseTime=true, SQLite DATE/DATETIME/TIMESTAMP columns), as text
	// (parsed in Location), or as an integer of Unix seconds.
	ReceivedAtColumn string
	// Location interprets received-at text that carries no zone. Default UTC.
	Location *time.Location
	// ReadTimeout bounds each call, Acknowledge included (on top of the
	// caller's ctx). Default
	// ReadTimeoutDefault.
	ReadTimeout time.Duration
	// MarkColumn, when set, is the processing-mark column Acknowledge writes
	// (seed 000 §6, CMINMSGS.PROCFLAG). NULL or empty means "not marked"; a
	// non-empty value is never overwritten.
	MarkColumn string
	// MarkTimeColumn, when set, receives the acknowledgement time with the mark
	// (CMINMSGS.PROCTIME). It requires MarkColumn.
	MarkTimeColumn string
	// Logger receives a warning for each received-at value that is not a
	// date-time (the row is still read, with ReceivedAt zero). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c *SQLTableConfig) validate() error {
	if c.Table == "" {
		return errors.New("relaysource: SQLTableConfig.Table is required")
	}
	if c.IDColumn == "" {
		return errors.New("relaysource: SQLTableConfig.IDColumn is required")
	}
	if c.MarkTimeColumn != "" && c.MarkColumn == "" {
		return errors.New("relaysource: SQLTableConfig.MarkTimeColumn requires MarkColumn")
	}
	if c.ReadTimeout < 0 {
		return fmt.Errorf("relaysource: SQLTableConfig.ReadTimeout %v is negative", c.ReadTimeout)
	}
	return nil
}

// SQLTable is a SequenceSource over a table reached through database/sql. It
// only reads, except Acknowledge (with MarkColumn set), which writes the
// processing mark of one row without ever overwriting one (seed 000 §6). It
// is safe for concurrent use. The caller owns db.
type SQLTable struct {
	db      *sql.DB
	cfg     SQLTableConfig
	queries *sqlTableQueries
}

var _ SequenceSource = (*SQLTable)(nil)

// NewSQLTable validates cfg, builds its queries and returns the source. It does
// not touch the database: a missing table shows up as an error of the first read.
func NewSQLTable(db *sql.DB, cfg SQLTableConfig) (*SQLTable, error) {
	if db == nil {
		return nil, errors.New("relaysource: NewSQLTable: db is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, ReadTimeoutDefault)
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	q, err := buildQueries(&cfg)
	if err != nil {
		return nil, err
	}
	return &SQLTable{db: db, cfg: cfg, queries: q}, nil
}

// ReadAfter returns at most limit rows with id > after in ascending id order
// (seed 000 §4.1 step 2), never filtered on a processing mark. Any failure —
// connection, missing table, a value that does not scan — is returned as an
// error; it is never reported as "no rows" (seed 000 §4.1 step 1). ctx and
// ReadTimeout bound the whole read, rows included.
func (s *SQLTable) ReadAfter(ctx context.Context, after int64, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("relaysource: read %s: limit %d must be positive", s.cfg.Table, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, s.queries.readAfter, after, limit)
	if err != nil {
		return nil, fmt.Errorf("relaysource: read %s after id %d: %w", s.cfg.Table, after, err)
	}
	defer rows.Close()

	out := make([]Row, 0, min(limit, 1024))
	for rows.Next() {
		var (
			r        Row
			key      sql.NullString
			payload  []byte
			received any
		)
		dest := []any{&r.ID}
		if s.cfg.KeyColumn != "" {
			dest = append(dest, &key)
		}
		if s.cfg.PayloadColumn != "" {
			dest = append(dest, &payload)
		}
		if s.cfg.ReceivedAtColumn != "" {
			dest = append(dest, &received)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("relaysource: read %s after id %d: scan: %w", s.cfg.Table, after, err)
		}
		r.Key = key.String
		r.Payload = payload
		if s.cfg.ReceivedAtColumn != "" {
			if r.ReceivedAt, err = s.parseReceivedAt(received); err != nil {
				// seed 000 §1.2: the received-at time is for display and
				// reconciliation only, and may be NULL. An unreadable value must not
				// stop intake of this and every later row: it reads as NULL, loudly.
				s.cfg.Logger.WarnContext(ctx, "relaysource: received-at unreadable; stored as NULL",
					"table", s.cfg.Table, "id", r.ID, "column", s.cfg.ReceivedAtColumn, "error", err)
				r.ReceivedAt = time.Time{}
			}
		}
		if n := len(out); r.ID <= after || (n > 0 && r.ID <= out[n-1].ID) {
			// The query orders by id; anything else means the id column is not what
			// the config says. Refuse rather than let the watermark count wrong.
			return nil, fmt.Errorf("relaysource: read %s after id %d: id %d out of order (is %s a unique increasing id?)", s.cfg.Table, after, r.ID, s.cfg.IDColumn)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relaysource: read %s after id %d: %w", s.cfg.Table, after, err)
	}
	return out, nil
}

// Bounds returns the smallest and largest id of the table; ok is false when it
// is empty. ctx and ReadTimeout bound the call.
func (s *SQLTable) Bounds(ctx context.Context) (minID, maxID int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	var lo, hi sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.queries.bounds).Scan(&lo, &hi); err != nil {
		return 0, 0, false, fmt.Errorf("relaysource: bounds of %s: %w", s.cfg.Table, err)
	}
	if !lo.Valid || !hi.Valid {
		return 0, 0, false, nil
	}
	return lo.Int64, hi.Int64, true, nil
}

// receivedAtLayouts are the text forms a received-at value may take: MySQL
// DATETIME text (parseTime=false) and SQLite's date-time formats.
var receivedAtLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseReceivedAt converts a scanned received-at value; nil (NULL) and MySQL's
// zero date give the zero time.
func (s *SQLTable) parseReceivedAt(v any) (time.Time, error) {
	var text string
	switch x := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		if x.IsZero() {
			return time.Time{}, nil
		}
		return x.UTC(), nil
	case int64:
		return time.Unix(x, 0).UTC(), nil
	case []byte:
		text = string(x)
	case string:
		text = x
	default:
		return time.Time{}, fmt.Errorf("received-at value of type %T is not a time", v)
	}
	text = strings.TrimSpace(text)
	if text == "" || strings.HasPrefix(text, "0000-00-00") {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	for _, layout := range receivedAtLayouts {
		if t, err := time.ParseInLocation(layout, text, s.cfg.Location); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("received-at %q is not a recognised date-time", text)
}
