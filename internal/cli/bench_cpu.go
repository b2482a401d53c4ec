package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
)

// cpuSample is the CPU time used so far by this process and by the
// PostgreSQL backends of one application name, and the server's WAL
// position.
type cpuSample struct {
	self     time.Duration
	backends map[int]time.Duration // by backend pid
	walLSN   int64                 // bytes
}

// benchCPU samples this process's CPU (/proc), that of every PostgreSQL
// backend whose application_name is app (found in pg_stat_activity; the
// server must run on this machine), and pg_current_wal_lsn — which counts
// every writer of the server, not only the bench's.
func benchCPU(ctx context.Context, pool *pgxpool.Pool, app string) (cpuSample, error) {
	s := cpuSample{}
	var lsn float64
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&lsn); err != nil {
		return s, fmt.Errorf("bench: WAL position: %w", err)
	}
	s.walLSN = int64(lsn)
	var err error
	if s.backends, err = backendsCPU(ctx, pool, app); err != nil {
		return s, err
	}
	s.self = shipbench.ProcessCPU(os.Getpid())
	return s, nil
}

// backendsCPU returns the CPU time so far of every PostgreSQL backend whose
// application_name is app, by pid (from /proc: the server must run on this
// machine).
func backendsCPU(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, app string) (map[int]time.Duration, error) {
	rows, err := q.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil, fmt.Errorf("bench: find backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("bench: find backends: %w", err)
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		out[pid] = shipbench.ProcessCPU(pid)
	}
	return out, nil
}

// since formats the CPU used from s0 to s per unit of work (n units): a
// backend absent from s0 started in between and counts whole.
func (s cpuSample) since(s0 cpuSample, n int) string {
	self := s.self - s0.self
	var pg time.Duration
	for pid, c := range s.backends {
		pg += c - s0.backends[pid]
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	return fmt.Sprintf("relay process %.2f s, PostgreSQL backends %.2f s (%d): %.0f + %.0f = %.0f µs per event; WAL %.0f bytes per event (server-wide)",
		self.Seconds(), pg.Seconds(), len(s.backends), per(self), per(pg), per(self+pg),
		float64(s.walLSN-s0.walLSN)/float64(n))
}
