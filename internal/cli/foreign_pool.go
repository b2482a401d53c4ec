package cli

import (
	"database/sql"
	"time"
)

// Bounds of every database/sql pool the CLI opens on a foreign database: a
// MySQL/MariaDB mailbox or source table, a SQLite source. database/sql
// leaves open connections unbounded by default, so a burst of HTTP sends or
// a slow server would open one per waiter until the server refuses them all
// (max_connections), other systems that share it included.
const (
	// foreignMaxOpenConns bounds the open connections; further callers wait
	// for one (bounded by their context).
	foreignMaxOpenConns = 10
	// foreignMaxIdleConns keeps as many idle, so a steady load does not
	// reconnect.
	foreignMaxIdleConns = foreignMaxOpenConns
	// foreignConnMaxLifetime retires a connection before a server, proxy or
	// firewall drops it silently (MySQL wait_timeout, NAT idle timers).
	foreignConnMaxLifetime = 5 * time.Minute
	// foreignConnMaxIdleTime closes a connection idle this long.
	foreignConnMaxIdleTime = time.Minute
)

// boundPool applies the foreign pool bounds to db and returns it.
func boundPool(db *sql.DB) *sql.DB {
	db.SetMaxOpenConns(foreignMaxOpenConns)
	db.SetMaxIdleConns(foreignMaxIdleConns)
	db.SetConnMaxLifetime(foreignConnMaxLifetime)
	db.SetConnMaxIdleTime(foreignConnMaxIdleTime)
	return db
}
