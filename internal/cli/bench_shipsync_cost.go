package cli

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
)

// applyCost measures what the apply phase of bench shipsync-ingress costs,
// in counts rather than wall time (the machine's cores are shared): the CPU
// time of this process, of the PostgreSQL backends serving the bench's
// connections (found by their application_name) and of the MariaDB threads
// serving its scratch database (information_schema.PROCESSLIST.TID), all
// read from /proc, so both servers must run on this machine (a figure it
// cannot read is 0); and the block accesses and tuple writes per table of
// the bench's schema (pg_statio_user_tables, pg_stat_user_tables) and the
// server's WAL bytes (pg_current_wal_lsn: every session's, not only the
// bench's).
type applyCost struct {
	statsURL string // a connection outside the bench's pool
	app      string // the bench pool's application_name
	mariaPID int

	self   time.Duration
	maria  map[int]time.Duration // every mariadbd thread at the start
	tables map[string]tableCounts
	walLSN string

	relay, pg, mariaCPU  time.Duration
	pgBackends, mThreads int
}

// tableCounts are one table's cumulative statistics.
type tableCounts struct {
	blocks                 int64 // heap, index and TOAST blocks read or hit
	ins, upd, hotUpd, dels int64
}

// startApplyCost takes the phase's starting figures. The bench pool's
// connections must have been closed just before (their statistics are
// flushed when a backend exits).
func startApplyCost(ctx context.Context, statsURL, app string, target *sql.DB) (*applyCost, error) {
	c := &applyCost{statsURL: statsURL, app: app, maria: map[int]time.Duration{}}
	if err := waitBackendsGone(ctx, statsURL, app); err != nil {
		return nil, err
	}
	var pidFile string
	if err := target.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err == nil {
		if b, err := os.ReadFile(pidFile); err == nil {
			c.mariaPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if c.mariaPID > 0 {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(c.mariaPID) + "/task")
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				c.maria[tid] = c.threadCPU(tid)
			}
		}
	}
	var err error
	if c.tables, c.walLSN, err = readTableCounts(ctx, statsURL, app); err != nil {
		return nil, err
	}
	c.self = shipbench.ProcessCPU(os.Getpid())
	return c, nil
}

// threadCPU is the CPU time of one mariadbd thread so far.
func (c *applyCost) threadCPU(tid int) time.Duration {
	return shipbench.ThreadCPU(c.mariaPID, tid)
}

// stopCPU reads the CPU figures at the end of the phase, while the bench's
// connections are still open: call it as soon as the last event is applied.
func (c *applyCost) stopCPU(ctx context.Context, target *sql.DB) error {
	c.relay = shipbench.ProcessCPU(os.Getpid()) - c.self
	conn, err := pgx.Connect(ctx, c.statsURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	backends, err := backendsCPU(ctx, conn, c.app)
	if err != nil {
		return err
	}
	for _, cpu := range backends {
		// Every backend of the pool was opened after the phase started.
		c.pg += cpu
	}
	c.pgBackends = len(backends)
	if c.mariaPID == 0 {
		return nil
	}
	trows, err := target.QueryContext(ctx, "SELECT TID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
	if err != nil {
		return err
	}
	defer trows.Close()
	for trows.Next() {
		var tid int
		if err := trows.Scan(&tid); err != nil {
			return err
		}
		// A thread may have served other connections before (the thread
		// cache): only what it used during the phase counts.
		c.mariaCPU += c.threadCPU(tid) - c.maria[tid]
		c.mThreads++
	}
	return trows.Err()
}

// finish reads the table statistics (the bench pool's connections must
// have been closed, so that their backends flushed them) and prints the
// phase's cost per applied event.
func (c *applyCost) finish(ctx context.Context, w io.Writer, events int) error {
	if err := waitBackendsGone(ctx, c.statsURL, c.app); err != nil {
		return err
	}
	end, lsn, err := readTableCounts(ctx, c.statsURL, c.app)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.statsURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var wal int64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", lsn, c.walLSN).Scan(&wal); err != nil {
		return err
	}
	n := float64(events)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	fmt.Fprintf(w, "bench shipsync-ingress: apply CPU: relay %.1f s, PostgreSQL %.1f s (%d backends), MariaDB %.1f s (%d threads): "+
		"%.0f µs per applied event (relay %.0f, PostgreSQL %.0f, MariaDB %.0f); server WAL %.0f bytes per event\n",
		c.relay.Seconds(), c.pg.Seconds(), c.pgBackends, c.mariaCPU.Seconds(), c.mThreads,
		us(c.relay+c.pg+c.mariaCPU), us(c.relay), us(c.pg), us(c.mariaCPU), float64(wal)/n)
	type delta struct {
		name string
		tableCounts
	}
	var ds []delta
	var total int64
	for name, e := range end {
		s := c.tables[name]
		d := delta{name, tableCounts{blocks: e.blocks - s.blocks, ins: e.ins - s.ins, upd: e.upd - s.upd,
			hotUpd: e.hotUpd - s.hotUpd, dels: e.dels - s.dels}}
		total += d.blocks
		if d.blocks > 0 {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b delta) int { return cmp.Or(cmp.Compare(b.blocks, a.blocks), strings.Compare(a.name, b.name)) })
	fmt.Fprintf(w, "bench shipsync-ingress: apply block accesses per event: %.1f in all", float64(total)/n)
	for _, d := range ds {
		fmt.Fprintf(w, "; %s %.1f (ins %.2f, upd %.2f of them HOT %.2f, del %.2f)", d.name, float64(d.blocks)/n,
			float64(d.ins)/n, float64(d.upd)/n, float64(d.hotUpd)/n, float64(d.dels)/n)
	}
	fmt.Fprintln(w)
	return nil
}

// readTableCounts reads the statistics of every table in the search_path
// schema of the bench (named app) and the server's WAL position.
func readTableCounts(ctx context.Context, statsURL, schema string) (map[string]tableCounts, string, error) {
	conn, err := pgx.Connect(ctx, statsURL)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT io.relname,
		coalesce(io.heap_blks_read, 0) + coalesce(io.heap_blks_hit, 0) + coalesce(io.idx_blks_read, 0) +
		coalesce(io.idx_blks_hit, 0) + coalesce(io.toast_blks_read, 0) + coalesce(io.toast_blks_hit, 0) +
		coalesce(io.tidx_blks_read, 0) + coalesce(io.tidx_blks_hit, 0),
		st.n_tup_ins, st.n_tup_upd, st.n_tup_hot_upd, st.n_tup_del
		FROM pg_statio_user_tables io JOIN pg_stat_user_tables st ON st.relid = io.relid
		WHERE io.schemaname = $1`, schema)
	if err != nil {
		return nil, "", err
	}
	out := map[string]tableCounts{}
	var name string
	var t tableCounts
	if _, err := pgx.ForEachRow(rows, []any{&name, &t.blocks, &t.ins, &t.upd, &t.hotUpd, &t.dels}, func() error {
		out[name] = t
		return nil
	}); err != nil {
		return nil, "", err
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return nil, "", err
	}
	return out, lsn, nil
}

// waitBackendsGone waits until no backend named app is left (a closed
// connection's backend exits, and flushes its statistics, shortly after).
func waitBackendsGone(ctx context.Context, statsURL, app string) error {
	conn, err := pgx.Connect(ctx, statsURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for range 500 {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("bench shipsync-ingress: the bench's PostgreSQL backends did not exit")
}
