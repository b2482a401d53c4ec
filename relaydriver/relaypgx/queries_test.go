package relaypgx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

// Every timestamp comes from a parameter (seed 000 §5.1): no SQL reads the
// database clock.
func TestNoDatabaseClock(t *testing.T) {
	clock := regexp.MustCompile(`(?i)\b(now\s*\(|current_timestamp|localtimestamp|clock_timestamp|statement_timestamp|transaction_timestamp)`)
	check := func(name, sql string) {
		for _, line := range strings.Split(sql, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			require.False(t, clock.MatchString(line), "%s reads the database clock: %s", name, line)
		}
	}
	for name, q := range queries {
		check(name, q)
	}
	err := fs.WalkDir(migrationFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrationFS, path)
		require.NoError(t, err)
		check(path, string(b))
		return nil
	})
	require.NoError(t, err)
}

func TestSavepointNames(t *testing.T) {
	for _, ok := range []string{"sp", "msg_2", "_x", "A9"} {
		sql, err := withIdent(qSavepoint, ok)
		require.NoError(t, err)
		require.Equal(t, "SAVEPOINT "+ok, sql)
	}
	for _, bad := range []string{"", "1x", "a b", "a;DROP TABLE x", `"q"`, "a-b", strings.Repeat("a", 64)} {
		_, err := withIdent(qSavepoint, bad)
		require.Error(t, err, "%q", bad)
	}
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestMapErr(t *testing.T) {
	require.NoError(t, mapErr("op", nil))

	err := mapErr("get", fmt.Errorf("scan: %w", pgx.ErrNoRows))
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	require.NotErrorIs(t, err, relaytype.ErrTransient)

	unique := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	err = mapErr("insert", unique)
	require.ErrorIs(t, err, relaytype.ErrConflict)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the original stays in the chain")
	require.Equal(t, "23505", pgErr.Code)

	for _, code := range []string{"40001", "40P01", "08006", "08001", "57P01", "55P03", "57014"} {
		err := mapErr("op", &pgconn.PgError{Code: code})
		require.ErrorIs(t, err, relaytype.ErrTransient, code)
		require.ErrorAs(t, err, &pgErr, code)
	}
	for _, code := range []string{"23503", "42601", "22P02"} {
		err := mapErr("op", &pgconn.PgError{Code: code})
		require.NotErrorIs(t, err, relaytype.ErrTransient, code)
		require.NotErrorIs(t, err, relaytype.ErrConflict, code)
	}

	require.ErrorIs(t, mapErr("op", context.DeadlineExceeded), relaytype.ErrTransient)
	require.ErrorIs(t, mapErr("op", &netErrorWrapper{netTimeout{}}), relaytype.ErrTransient)
	require.NotErrorIs(t, mapErr("op", context.Canceled), relaytype.ErrTransient, "the caller's own cancellation")
	require.NotErrorIs(t, mapErr("op", errors.New("other")), relaytype.ErrTransient)
}

type netErrorWrapper struct{ err error }

func (w *netErrorWrapper) Error() string { return "read: " + w.err.Error() }
func (w *netErrorWrapper) Unwrap() error { return w.err }
