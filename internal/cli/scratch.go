package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/dsn"
)

// scratchSchema creates the PostgreSQL schema name on the server of pgURL
// and returns pgURL with search_path set to it, and drop, which removes it
// with everything in it (best effort). Errors never carry the URL's password.
func scratchSchema(ctx context.Context, pgURL, name string) (schemaURL string, drop func(), err error) {
	schemaURL, err = dsn.WithParam(pgURL, "search_path", name)
	if err != nil {
		return "", nil, fmt.Errorf("--postgres: %w", err)
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", nil, fmt.Errorf("--postgres %s: %w", dsn.Redact(pgURL), dsn.Scrub(err, pgURL))
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return "", nil, err
	}
	return schemaURL, func() {
		bg := context.WithoutCancel(ctx)
		_, _ = conn.Exec(bg, "DROP SCHEMA "+name+" CASCADE") // best effort
		_ = conn.Close(bg)
	}, nil
}
