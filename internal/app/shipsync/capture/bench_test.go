package capture_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
)

// BenchmarkInsert measures what the triggers add to a business write: one
// autocommit INSERT of a small row, into a table without and with capture.
func BenchmarkInsert(b *testing.B) {
	ctx := context.Background()
	db, _ := scratchDB(b, mariaServer())
	for _, table := range []string{"plain", "captured"} {
		_, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "+
			"qty DECIMAL(12,4) NULL, at DATETIME(6) NULL, "+apply.SyncColumns+")")
		require.NoError(b, err)
	}
	_, err := capture.Install(ctx, db, capture.InstallConfig{NodeID: node, Tables: []string{"captured"}})
	require.NoError(b, err)
	for _, table := range []string{"plain", "captured"} {
		b.Run(table, func(b *testing.B) {
			q := "INSERT INTO " + table + " (id, name, qty, at, _sync_revision, _sync_origin, _sync_updated_at) " +
				"VALUES (?, 'MV Tern', -12.5, UTC_TIMESTAMP(6), UUID(), 'x', UTC_TIMESTAMP(6))"
			truncate(b, db, table)
			i := 0
			for b.Loop() {
				i++
				_, err := db.ExecContext(ctx, q, i)
				require.NoError(b, err)
			}
		})
		// 100 rows per statement: the commit no longer hides the row cost.
		b.Run(table+"/100-rows", func(b *testing.B) {
			truncate(b, db, table)
			i := 0
			for b.Loop() {
				q := "INSERT INTO " + table + " (id, name, qty, at, _sync_revision, _sync_origin, _sync_updated_at) VALUES "
				for j := range 100 {
					if j > 0 {
						q += ","
					}
					i++
					q += fmt.Sprintf("(%d, 'MV Tern', -12.5, UTC_TIMESTAMP(6), UUID(), 'x', UTC_TIMESTAMP(6))", i)
				}
				_, err := db.ExecContext(ctx, q)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(100*b.N), "ns/row")
		})
	}
}

// truncate empties table (TRUNCATE fires no trigger), so -count reruns.
func truncate(b *testing.B, db *sql.DB, table string) {
	_, err := db.ExecContext(context.Background(), "TRUNCATE TABLE "+table)
	require.NoError(b, err)
}

// BenchmarkCapture measures the capture itself: rows/s from the changelog
// to records acknowledged by Kafka (kfake), driven by Step; each iteration
// first inserts 2,000 rows (100 per statement, not timed).
func BenchmarkCapture(b *testing.B) {
	const n = 2000
	bu := setup(b)
	next := 0
	for b.Loop() {
		b.StopTimer()
		for range n / 100 {
			q := "INSERT INTO voyage (id, leg, vessel, fuel, departed, note) VALUES "
			for j := range 100 {
				if j > 0 {
					q += ","
				}
				next++
				q += fmt.Sprintf("(%d, 1, 'MV Tern', -1234.5678, '2026-12-01 07:02:13.123456', 'fog')", next)
			}
			_, err := bu.db.ExecContext(bu.ctx, q)
			require.NoError(b, err)
		}
		b.StartTimer()
		bu.drain()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
