package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/dsn/mysqldsn"
)

// MariaDBDSNDefault is the server part of the MariaDB DSN tests use when
// TEST_MARIADB_DSN is unset: root with an empty password on the local server.
const MariaDBDSNDefault = "root@tcp(127.0.0.1:3306)/"

// mariaDBSetupTimeout bounds connecting to the server and creating or dropping
// the test database.
const mariaDBSetupTimeout = 15 * time.Second

// MariaDB returns a pool on a fresh database relay_t_<random> on the MariaDB
// (or MySQL) server named by TEST_MARIADB_DSN (default MariaDBDSNDefault; any
// database name in it is replaced). The pool parses DATETIME values into
// time.Time in UTC. The database is dropped and the pool closed in t.Cleanup.
//
// MariaDB stands for a foreign system (a shared mailbox), never engine state
// (DESIGN.md §2). A test that needs it FAILS when the server cannot be reached:
// it never skips (STYLE.md §3).
func MariaDB(t testing.TB) *sql.DB {
	t.Helper()
	db, _ := MariaDBWithDSN(t)
	return db
}

// MariaDBServer returns the server DSN tests use: TEST_MARIADB_DSN, or
// MariaDBDSNDefault when it is unset.
func MariaDBServer() string {
	if s := os.Getenv("TEST_MARIADB_DSN"); s != "" {
		return s
	}
	return MariaDBDSNDefault
}

// MariaDBWithDSN is MariaDB that also returns the DSN of the fresh database
// (with parseTime=true), for code under test that opens its own connections,
// such as a child process.
func MariaDBWithDSN(t testing.TB) (*sql.DB, string) {
	t.Helper()
	cfg, err := mysqldsn.Parse(MariaDBServer())
	if err != nil {
		t.Fatalf("testdb: TEST_MARIADB_DSN: %v", err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.Loc = time.UTC

	ctx, cancel := context.WithTimeout(context.Background(), mariaDBSetupTimeout)
	defer cancel()

	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testdb: open MariaDB %s: %v", cfg.Addr, err)
	}
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		t.Fatalf("testdb: MariaDB is required but cannot be reached at %s (set TEST_MARIADB_DSN, or start it with "+
			"`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`): %v", cfg.Addr, err)
	}

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		_ = admin.Close()
		t.Fatalf("testdb: random database name: %v", err)
	}
	name := "relay_t_" + hex.EncodeToString(b[:])
	// name is built from hex digits only, so quoting it is safe.
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("CREATE DATABASE `%s` CHARACTER SET utf8mb4", name)); err != nil {
		_ = admin.Close()
		t.Fatalf("testdb: create MariaDB database %s: %v", name, err)
	}

	var db *sql.DB
	t.Cleanup(func() {
		if db != nil {
			_ = db.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), mariaDBSetupTimeout)
		defer cancel()
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS `%s`", name)); err != nil {
			t.Errorf("testdb: drop MariaDB database %s: %v", name, err)
		}
		_ = admin.Close()
	})

	dbCfg := cfg.Clone()
	dbCfg.DBName = name
	db, err = sql.Open("mysql", dbCfg.FormatDSN())
	if err != nil {
		t.Fatalf("testdb: open MariaDB database %s: %v", name, err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testdb: connect to MariaDB database %s: %v", name, err)
	}
	return db, dbCfg.FormatDSN()
}
