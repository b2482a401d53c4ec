package capture_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

const (
	node    = "ship-7"
	logical = "ship7"
)

var t0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

// mariaServer is the server DSN of the tests (TEST_MARIADB_DSN, default
// the local root).
func mariaServer() string {
	return testdb.MariaDBServer()
}

// scratchDB creates a scratch database on server and returns a pool on it
// and its name. An unreachable server fails tb — never a skip.
func scratchDB(tb testing.TB, server string) (*sql.DB, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "relay_capture_" + hex.EncodeToString(b[:])
	dsn, drop, err := mysqldsn.CreateScratch(ctx, server, name)
	if err != nil {
		tb.Fatalf("capture tests need MariaDB (TEST_MARIADB_DSN): %v", err)
		return nil, ""
	}
	tb.Cleanup(drop)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatalf("open scratch database: %v", err)
		return nil, ""
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db, name
}

// bundle is one test's pipeline: a scratch business database, the SQLite
// state, an in-process Kafka and the capture, on a fake clock.
type bundle struct {
	t       testing.TB
	ctx     context.Context
	db      *sql.DB
	dbName  string
	clock   *relayclock.Fake
	cluster *kfake.Cluster
	store   *relaysqlite.Driver
	cap     *capture.Capture
}

// voyageDDL has a composite key and one column of each mapped type.
const voyageDDL = `CREATE TABLE voyage (
	id INT NOT NULL, leg SMALLINT UNSIGNED NOT NULL, vessel VARCHAR(64) NOT NULL,
	fuel DECIMAL(12,4) NULL, cargo BIGINT NULL, crew TINYINT UNSIGNED NULL, speed DOUBLE NULL, ratio FLOAT NULL,
	departed DATETIME(6) NULL, logged_on DATE NULL, logged_at DATETIME NULL, updated TIMESTAMP(3) NULL,
	watch TIME(6) NULL, built YEAR NULL, photo BLOB NULL, code BINARY(4) NULL, meta JSON NULL,
	status ENUM('sea','port') NULL, active BIT(1) NULL, flags BIT(10) NULL, note TEXT NULL,
	` + apply.SyncColumns + `,
	PRIMARY KEY (id, leg)) ENGINE=InnoDB`

func setup(t testing.TB) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: context.Background(), clock: relayclock.NewFake(t0)}
	b.db, b.dbName = scratchDB(t, mariaServer())
	b.exec(voyageDDL)
	_, err := capture.Install(b.ctx, b.db, capture.InstallConfig{NodeID: node, Tables: []string{"voyage"}, Clock: b.clock})
	require.NoError(t, err)

	b.store, err = relaysqlite.Open(b.ctx, filepath.Join(t.TempDir(), "capture.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.store.Close() })
	require.NoError(t, capture.Migrate(b.ctx, b.store, b.clock))

	b.cluster, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, b.topic()))
	require.NoError(t, err)
	t.Cleanup(b.cluster.Close)
	b.cap = b.newCapture()
	return b
}

// newCapture builds a capture on the bundle's database, state and Kafka,
// with a sink of its own: calling it again is a restart.
func (b *bundle) newCapture() *capture.Capture {
	b.t.Helper()
	sink, err := relaykafka.New(relaykafka.Config{Brokers: b.cluster.ListenAddrs(), ProduceTimeout: 10 * time.Second})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = sink.Close(context.Background()) })
	c, err := capture.New(capture.Config{DB: b.db, Store: b.store, Sink: sink, Logical: logical,
		MaxCommitDelay: time.Minute, Clock: b.clock})
	require.NoError(b.t, err)
	return c
}

func (b *bundle) topic() string { return "sync.cdc." + logical + "." + b.dbName + ".voyage" }

func (b *bundle) exec(q string, args ...any) {
	b.t.Helper()
	_, err := b.db.ExecContext(b.ctx, q, args...)
	require.NoError(b.t, err)
}

// drain steps the capture until the changelog is read, every message is
// terminal and every event sent; a hole (a rolled-back id) is aged out by
// advancing the fake clock past the max commit delay.
func (b *bundle) drain() {
	b.t.Helper()
	for range 200 {
		n, err := b.cap.Step(b.ctx)
		require.NoError(b.t, err)
		if n > 0 {
			continue
		}
		st, err := b.cap.Intake().Stats(b.ctx)
		require.NoError(b.t, err)
		var maxID int64
		require.NoError(b.t, b.db.QueryRowContext(b.ctx, "SELECT COALESCE(MAX(id), 0) FROM _sync_changelog").Scan(&maxID))
		ms, err := b.cap.Engine().Stats(b.ctx)
		require.NoError(b.t, err)
		if st.Cursor != nil && st.Cursor.Watermark >= maxID && ms.Backlog() == 0 {
			return
		}
		b.clock.Advance(30 * time.Second) // ages a hole; makes backoffs due
	}
	b.t.Fatal("capture did not catch up")
}

// hold runs q in a transaction on its own connection and leaves it open:
// the changelog id its trigger took stays invisible until the caller
// commits (the visibility hole). Cleanup rolls it back if still open.
func (b *bundle) hold(q string) *sql.Tx {
	b.t.Helper()
	conn, err := b.db.Conn(b.ctx)
	require.NoError(b.t, err)
	held, err := conn.BeginTx(b.ctx, nil)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = held.Rollback(); _ = conn.Close() })
	_, err = held.ExecContext(b.ctx, q)
	require.NoError(b.t, err)
	return held
}

// recordCount counts the records on the topic now.
func (b *bundle) recordCount() int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	recs, err := kafkaread.All(ctx, b.cluster.ListenAddrs(), b.topic())
	require.NoError(b.t, err)
	return len(recs)
}

// record is one Kafka record decoded.
type record struct {
	ev      *cdc.Event
	headers map[string]string
	key     string
}

// read decodes every record of the topic, grouped by the record key's
// columns ("id/leg").
func (b *bundle) read() map[string][]record {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	recs, err := kafkaread.All(ctx, b.cluster.ListenAddrs(), b.topic())
	require.NoError(b.t, err)
	dec, err := cdc.New(cdc.Config{})
	require.NoError(b.t, err)
	out := map[string][]record{}
	for _, r := range recs {
		var hs []cdc.Header
		for k, v := range r.Headers {
			hs = append(hs, cdc.Header{Key: k, Value: []byte(v)})
		}
		ev, err := dec.Decode(cdc.Message{Topic: b.topic(), Key: []byte(r.Key), Value: r.Value, Headers: hs})
		require.NoError(b.t, err, "record at offset %d", r.Offset)
		k := keyOf(ev.Key)
		out[k] = append(out[k], record{ev: ev, headers: r.Headers, key: r.Key})
	}
	return out
}

func keyOf(cols []*pb.ColumnValue) string {
	s := ""
	for i, c := range cols {
		if i > 0 {
			s += "/"
		}
		s += c.GetName() + "=" + string(rune('0'+c.GetIntValue()))
	}
	return s
}

// cols maps a row image by column name.
func cols(img *pb.RowImage) map[string]*pb.ColumnValue {
	out := map[string]*pb.ColumnValue{}
	for _, c := range img.GetColumns() {
		out[c.GetName()] = c
	}
	return out
}

// ops lists the ops of records.
func ops(rs []record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ev.Op.String())
	}
	return out
}

// messageStates counts the capture queue's messages per state.
func (b *bundle) messageStates() map[relaytype.State]int64 {
	b.t.Helper()
	st, err := b.cap.Engine().Stats(b.ctx)
	require.NoError(b.t, err)
	return st.Counts
}
