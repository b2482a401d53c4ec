package relaysource

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// HoleProber is implemented by a source that can tell when a missing id can
// no longer appear. An id is missing below a visible one when the
// transaction that took it has not committed yet, or never will (rolled
// back, failed). That transaction began before the larger id became
// visible; so once every transaction that was open when the hole was first
// seen has ended, the hole is permanent. relayintake asks a prober (when
// its Config.ProbeHoles is set) instead of waiting the whole maximum commit
// delay.
type HoleProber interface {
	// HoleMark returns a mark of "now" on the database's side, taken after
	// the read that saw the hole.
	HoleMark(ctx context.Context) (int64, error)
	// HoleSettled reports whether every transaction open at mark has ended.
	// It may answer false when it cannot be sure (a transaction begun in the
	// mark's own second); an error means "unknown", never "settled".
	HoleSettled(ctx context.Context, mark int64) (bool, error)
}

var _ HoleProber = (*SQLTable)(nil)

// HoleMark implements HoleProber. On MySQL/MariaDB it is the server's Unix
// time in seconds; on SQLite, which runs one write transaction at a time, it
// is 0 and every hole is settled as soon as it is seen.
func (s *SQLTable) HoleMark(ctx context.Context) (int64, error) {
	if s.cfg.Dialect != DialectMySQL {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	var mark int64
	if err := s.db.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP()`).Scan(&mark); err != nil {
		return 0, fmt.Errorf("relaysource: %s: hole mark: %w", s.cfg.Table, err)
	}
	return mark, nil
}

// holeOpenSQL counts, in information_schema.INNODB_TRX, the caller's own
// transaction and the other InnoDB transactions begun at or before a Unix
// second. trx_started is a DATETIME in the server's system time zone, so
// the statement converts it in that zone whatever the session's is (SET
// STATEMENT is MariaDB's; on a server without it the probe fails and the
// intake falls back to the maximum commit delay). Reading that table needs
// the PROCESS privilege.
const holeOpenSQL = `SET STATEMENT time_zone = 'SYSTEM' FOR
SELECT COALESCE(SUM(trx_mysql_thread_id = CONNECTION_ID()), 0),
       COALESCE(SUM(trx_mysql_thread_id <> CONNECTION_ID() AND UNIX_TIMESTAMP(trx_started) <= ?), 0)
FROM information_schema.INNODB_TRX`

// HoleSettled implements HoleProber: on MySQL/MariaDB, no InnoDB
// transaction begun at or before mark's second is still open; on SQLite,
// always.
//
// INNODB_TRX is served from a cache that the server refreshes only when it
// has not been read for 0.1 s, so a read may show the transactions of some
// time ago — missing one begun since. The probe therefore opens a
// transaction of its own (a consistent snapshot, which InnoDB lists) and
// trusts the table only when it shows that transaction: the list is then
// newer than the probe's start, which is after the mark, and holds every
// transaction open at the mark that is still open. When it does not, the
// answer is "not settled" and a later round asks again; a server whose
// table is read more often than every 0.1 s by others may never answer, and
// holes then wait the maximum commit delay.
func (s *SQLTable) HoleSettled(ctx context.Context, mark int64) (bool, error) {
	if s.cfg.Dialect != DialectMySQL {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("relaysource: %s: hole probe: %w", s.cfg.Table, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return false, fmt.Errorf("relaysource: %s: hole probe: %w", s.cfg.Table, err)
	}
	var self, open int64
	err = conn.QueryRowContext(ctx, holeOpenSQL, mark).Scan(&self, &open)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		// Never hand a connection with an open transaction back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if err == nil {
			err = rerr
		}
	}
	if err != nil {
		return false, fmt.Errorf("relaysource: %s: hole probe: %w", s.cfg.Table, err)
	}
	return self > 0 && open == 0, nil
}
