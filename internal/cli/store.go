package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
)

// openStore opens the store a --store flag names:
//
//	postgres://… or postgresql://…   PostgreSQL (pgx)
//	sqlite:PATH, file:PATH or PATH    SQLite file (created if absent)
func openStore(ctx context.Context, url string) (relaydriver.Driver, error) {
	switch {
	case url == "":
		return nil, fmt.Errorf("--store is empty: give postgres://… or a SQLite file path")
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		d, err := relaypgx.Open(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL store %s: %w", redactURL(url), err)
		}
		return d, nil
	default:
		path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "file:")
		d, err := relaysqlite.Open(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
		}
		return d, nil
	}
}

// redactURL hides a password in a connection URL for messages and logs.
func redactURL(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return url
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return url
}
