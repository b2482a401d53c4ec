package cli

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
)

// openStore opens the store a --store flag names, in one of the forms
// dsn.ParseStore accepts (dsn.Forms): a PostgreSQL URL or keyword/value DSN,
// sqlite:PATH, or an explicit SQLite file path. Anything else is refused
// before a file is created. Messages show the store only redacted.
func openStore(ctx context.Context, s string) (relaydriver.Driver, error) {
	st, err := dsn.ParseStore(s)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	if st.Kind == dsn.Postgres {
		return openPostgres(ctx, st)
	}
	d, err := relaysqlite.Open(ctx, st.Conn)
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", st, err)
	}
	return d, nil
}

// openPG opens the PostgreSQL store a --store flag names; msgx runs on
// PostgreSQL only.
func openPG(ctx context.Context, s string) (*relaypgx.Driver, error) {
	st, err := dsn.ParseStore(s)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	if st.Kind != dsn.Postgres {
		return nil, fmt.Errorf("--store %s: msgx runs on PostgreSQL (postgres://… or a keyword/value DSN)", st)
	}
	return openPostgres(ctx, st)
}

func openPostgres(ctx context.Context, st dsn.Store) (*relaypgx.Driver, error) {
	d, err := relaypgx.Open(ctx, st.Conn)
	if err != nil {
		// relaypgx.Open scrubs its errors already; scrubbing again costs
		// nothing and keeps this message safe whatever the driver returns.
		return nil, fmt.Errorf("open PostgreSQL store %s: %w", st, dsn.Scrub(err, st.Conn))
	}
	return d, nil
}
