package relayintake_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysource"
)

// mariaMailbox points the bundle's intake at an InnoDB AUTO_INCREMENT mailbox on
// the real MariaDB server and returns its pool.
func mariaMailbox(t *testing.T, b *bundle) *sql.DB {
	t.Helper()
	db := testdb.MariaDB(t)
	_, err := db.ExecContext(b.ctx, "CREATE TABLE CMINMSGS (ID BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "+
		"FLID VARCHAR(32) NULL, CONTENT MEDIUMTEXT NULL, RECEIVED_AT DATETIME(6) NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	src, err := relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectMySQL, Table: "CMINMSGS", IDColumn: "ID",
		KeyColumn: "FLID", ReceivedAtColumn: "RECEIVED_AT", // no payload: read at processing time
	})
	require.NoError(t, err)
	b.src = src
	b.in = b.newIntake(b.store, src)
	return db
}

// holdFirstID begins a transaction on its own connection that inserts a row and
// stays open: it takes id 1 but is invisible to everyone else — the real
// visibility hole (a smaller id commits after larger ones).
// Rows 2..5 are then inserted and committed on other connections.
func holdFirstID(t *testing.T, ctx context.Context, db *sql.DB) *sql.Tx {
	t.Helper()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	held, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Rollback() })
	r, err := held.ExecContext(ctx, "INSERT INTO CMINMSGS (FLID, CONTENT, RECEIVED_AT) VALUES ('FL1', 'late', NOW(6))")
	require.NoError(t, err)
	id, err := r.LastInsertId()
	require.NoError(t, err)
	require.Equal(t, int64(1), id)

	for i := 2; i <= 5; i++ {
		r, err := db.ExecContext(ctx, "INSERT INTO CMINMSGS (FLID, CONTENT, RECEIVED_AT) VALUES ('FL', 'x', NULL)")
		require.NoError(t, err)
		id, err := r.LastInsertId()
		require.NoError(t, err)
		require.Equal(t, int64(i), id)
	}
	return held
}

// A held transaction that commits within the max commit delay: nothing is
// enqueued while id 1 is invisible, then 1..5 in one round, in id order.
func TestMariaDBVisibilityHoleCommits(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		db := mariaMailbox(t, b)
		b.seed(relayintake.SeedZero)
		held := holdFirstID(t, b.ctx, db)

		res := b.round()
		require.Equal(t, 4, res.Read, "rows 2..5 are visible, 1 is not")
		require.Equal(t, int64(0), res.Watermark)
		require.Equal(t, 0, res.Enqueued)
		require.Equal(t, int64(1), res.HoleAt)
		requireTime(t, t0, res.HoleSince)
		requireTime(t, t0, b.cursor().HoleSince)
		require.Empty(t, b.messageIDs())

		b.clock.Advance(delay - time.Second)
		res = b.round()
		require.Equal(t, int64(0), res.Watermark)
		require.Empty(t, b.messageIDs(), "still nothing while the hole is young")

		require.NoError(t, held.Commit())
		res = b.round()
		require.Equal(t, int64(5), res.Watermark)
		require.Equal(t, 5, res.Enqueued, "1..5 in one go")
		require.Equal(t, span(1, 5), b.messageIDs())
		require.True(t, b.cursor().HoleSince.IsZero())
		require.Empty(t, b.holes())
		require.Equal(t, 0.0, metricValue(t, b, "relay_permanent_holes_total"))

		m, err := b.store.GetExecutor().MessageGet(b.ctx, queue, 1)
		require.NoError(t, err)
		require.Equal(t, "FL1", m.Key)
		require.Nil(t, m.Payload, "payload not copied without a payload column")
		require.False(t, m.ReceivedAt.IsZero())
		m, err = b.store.GetExecutor().MessageGet(b.ctx, queue, 2)
		require.NoError(t, err)
		require.True(t, m.ReceivedAt.IsZero(), "NULL received-at stays NULL")
	})
}

// A held transaction that rolls back leaves a permanent hole: released after
// the max commit delay, logged and counted; rows 2..5 are enqueued.
func TestMariaDBVisibilityHoleRollsBack(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		db := mariaMailbox(t, b)
		b.seed(relayintake.SeedZero)
		held := holdFirstID(t, b.ctx, db)

		require.Equal(t, int64(1), b.round().HoleAt)
		require.NoError(t, held.Rollback())

		b.clock.Advance(delay - time.Nanosecond)
		res := b.round()
		require.Zero(t, res.ReleasedFirst, "not before the max commit delay")
		require.Empty(t, b.messageIDs())

		b.clock.Advance(time.Nanosecond)
		res = b.round()
		require.Equal(t, int64(1), res.ReleasedFirst)
		require.Equal(t, int64(1), res.ReleasedLast)
		require.Equal(t, int64(1), res.Watermark)
		require.True(t, res.More)
		holes := b.holes()
		require.Len(t, holes, 1)
		require.Equal(t, int64(1), holes[0].ID)
		requireTime(t, t0, holes[0].FirstSeenAt)
		requireTime(t, t0.Add(delay), holes[0].ReleasedAt)
		require.Equal(t, 1.0, metricValue(t, b, "relay_permanent_holes_total"))

		res = b.round()
		require.Equal(t, int64(5), res.Watermark)
		require.Equal(t, 4, res.Enqueued)
		require.Equal(t, span(2, 5), b.messageIDs())
		require.Equal(t, 1.0, metricValue(t, b, "relay_permanent_holes_total"))
	})
}

// With ProbeHoles, a hole whose transaction is still open is never released
// early (however many rounds run), and once it rolls back the hole is
// released without the max commit delay having passed on the intake's
// clock. Other tests' transactions on the same server may delay the
// release (the probe only knows that some transaction older than the hole
// is open), never bring it forward.
func TestMariaDBProbedHole(t *testing.T) {
	t.Parallel()
	b, held := probedHole(t)

	for range 5 {
		res := b.round()
		require.Equal(t, int64(1), res.HoleAt, "the open transaction's hole waits")
		require.Zero(t, res.ReleasedFirst)
	}
	require.NoError(t, held.Rollback())
	var released *relayintake.RoundResult
	require.Eventually(t, func() bool {
		res := b.round()
		if res.ReleasedFirst != 0 {
			released = res
		}
		return released != nil
	}, 60*time.Second, 250*time.Millisecond, "a rolled-back hole is released once no older transaction is open")
	require.Equal(t, int64(1), released.ReleasedFirst)
	require.Equal(t, int64(1), released.ReleasedLast)
	require.True(t, released.ReleasedSettled, "released by the probe, not by age")
	require.Equal(t, t0, b.clock.Now(), "the intake's clock never moved")
	res := b.round()
	require.Equal(t, int64(5), res.Watermark)
	require.Equal(t, span(2, 5), b.messageIDs())
	require.Len(t, b.holes(), 1, "the released hole is logged like an aged one (and watched for a late row)")
}

// The probe marks a hole in the round that first sees it and asks about it
// in later rounds: a hole held by a transaction that then commits is
// enqueued in order, never released.
func TestMariaDBProbedHoleCommits(t *testing.T) {
	t.Parallel()
	b, held := probedHole(t)
	require.Equal(t, int64(1), b.round().HoleAt)
	require.Equal(t, int64(1), b.round().HoleAt)
	require.NoError(t, held.Commit())
	res := b.round()
	require.Equal(t, int64(5), res.Watermark)
	require.Equal(t, span(1, 5), b.messageIDs())
	require.Empty(t, b.holes())
}

// probedHole is a probing intake on a MariaDB mailbox whose id 1 is held by
// an open transaction while 2..5 are committed.
func probedHole(t *testing.T) (*bundle, *sql.Tx) {
	t.Helper()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.ProbeHoles = true })
	db := mariaMailbox(t, b)
	b.seed(relayintake.SeedZero)
	return b, holdFirstID(t, b.ctx, db)
}
