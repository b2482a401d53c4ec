package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// PGURLDefault is the PostgreSQL URL tests use when TEST_DATABASE_URL is unset:
// the local server, user postgres (trust auth), database test.
const PGURLDefault = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// pgSetupTimeout bounds connecting, creating and dropping a test schema.
const pgSetupTimeout = 15 * time.Second

// PGURL returns TEST_DATABASE_URL, or PGURLDefault when it is unset.
func PGURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return PGURLDefault
}

// PGSchema creates a fresh schema t_<random> on the server of PGURL and returns
// PGURL (a URL or a keyword/value DSN) with search_path set to it (a runtime
// parameter pgx sends at connect, dsn.WithParam), so every connection opened
// from it sees the test's own tables. The schema is dropped (CASCADE) in t.Cleanup. The test fails when the
// server cannot be reached.
func PGSchema(t testing.TB) string {
	t.Helper()
	base := PGURL()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testdb: random schema name: %v", err)
	}
	schema := "t_" + hex.EncodeToString(b[:])
	schemaURL, err := dsn.WithParam(base, "search_path", schema)
	if err != nil {
		t.Fatalf("testdb: TEST_DATABASE_URL: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testdb: PostgreSQL at %s is not reachable (%v); start it "+
			"(pg_ctlcluster --skip-systemctl-redirect <version> main start) or set TEST_DATABASE_URL", dsn.Redact(base), dsn.Scrub(err, base))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("testdb: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("testdb: drop schema %s: connect: %v", schema, dsn.Scrub(err, base))
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("testdb: drop schema %s: %v", schema, err)
		}
	})
	return schemaURL
}

// PGDriver opens a relaypgx driver on a fresh schema (PGSchema) with the engine
// migration line applied, and closes it in t.Cleanup (before the schema is
// dropped). The test fails when the server cannot be reached.
func PGDriver(t testing.TB) *relaypgx.Driver {
	t.Helper()
	return PGDriverAt(t, PGSchema(t))
}

// PGDriverAt is PGDriver on the schema URL dsn (from PGSchema), for tests that
// also hand the URL to code under test, such as a child process.
func PGDriverAt(t testing.TB, dsn string) *relaypgx.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
	defer cancel()
	d, err := relaypgx.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("testdb: open relaypgx driver: %v", err) // relaypgx.Open shows no password
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("testdb: close relaypgx driver: %v", err)
		}
	})
	clock := relayclock.NewFake(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d)); err != nil {
		t.Fatalf("testdb: migrate engine line: %v", err)
	}
	return d
}
