package dsn_test

import (
	"fmt"

	"github.com/relayhq/relay/internal/dsn"
)

// A --store string is classified before anything is opened, and shown only
// redacted.
func ExampleParseStore() {
	for _, s := range []string{
		"postgres://relay:p%40ss@db1:5432/relay?sslmode=disable",
		"host=db1 dbname=relay user=relay password='p@ss word'",
		"sqlite:relay",
		"./relay.db",
		"relay",
	} {
		st, err := dsn.ParseStore(s)
		if err != nil {
			fmt.Println("refused:", err)
			continue
		}
		fmt.Println(st.Kind, st)
	}
	// Output:
	// postgres postgres://relay:xxxxx@db1:5432/relay?sslmode=disable
	// postgres host=db1 dbname=relay user=relay password=xxxxx
	// sqlite relay
	// sqlite ./relay.db
	// refused: relay: not a store: give a PostgreSQL URL (postgres://… or postgresql://…), a PostgreSQL keyword/value DSN (host=… dbname=… user=…), sqlite:PATH, or a SQLite file path that starts with /, ./ or ../ or ends in .db, .sqlite or .sqlite3
}

// Redact masks a password wherever the DSN's form puts it; a MySQL password
// runs to the last '@' before the database name.
func ExampleRedact() {
	fmt.Println(dsn.Redact("postgres://relay@db1/relay?password=s3cret"))
	fmt.Println(dsn.Redact("relay:p@ss@tcp(127.0.0.1:3306)/aodb"))
	// Output:
	// postgres://relay@db1/relay?password=xxxxx
	// relay:xxxxx@tcp(127.0.0.1:3306)/aodb
}
