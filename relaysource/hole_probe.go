package relaysource

import (
	"context"
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

// holeOpenSQL counts the InnoDB transactions begun at or before a Unix
// second. trx_started is a DATETIME in the server's system time zone, so
// the statement converts it in that zone whatever the session's is
// (SET STATEMENT is MariaDB's; on a server without it the probe fails and
// the intake falls back to the maximum commit delay). Reading INNODB_TRX
// needs the PROCESS privilege.
const holeOpenSQL = `SET STATEMENT time_zone = 'SYSTEM' FOR
SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE UNIX_TIMESTAMP(trx_started) <= ?`

// HoleSettled implements HoleProber: on MySQL/MariaDB, no InnoDB
// transaction begun at or before mark's second is still open; on SQLite,
// always.
func (s *SQLTable) HoleSettled(ctx context.Context, mark int64) (bool, error) {
	if s.cfg.Dialect != DialectMySQL {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	var open int64
	if err := s.db.QueryRowContext(ctx, holeOpenSQL, mark).Scan(&open); err != nil {
		return false, fmt.Errorf("relaysource: %s: hole probe: %w", s.cfg.Table, err)
	}
	return open == 0, nil
}
