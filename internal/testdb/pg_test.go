package testdb

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaymigrate"
)

// The URL PGSchema returns selects the fresh schema through search_path, and
// the schema is gone after the test.
func TestPGSchema(t *testing.T) {
	var schema string
	t.Run("use", func(t *testing.T) {
		dsn := PGSchema(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		defer conn.Close(t.Context())
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema))
		require.True(t, strings.HasPrefix(schema, "t_"), schema)
		_, err = conn.Exec(t.Context(), "CREATE TABLE x (id int)")
		require.NoError(t, err)
		var table string
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT table_schema FROM information_schema.tables WHERE table_name = 'x' AND table_schema = $1", schema).Scan(&table))
	})
	conn, err := pgx.Connect(t.Context(), PGURL())
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n))
	require.Zero(t, n, "schema dropped in cleanup")
}

func TestPGDriverMigrated(t *testing.T) {
	d := PGDriver(t)
	versions, err := d.Migrator().AppliedVersions(t.Context(), "engine")
	require.NoError(t, err)
	migs, err := relaymigrate.Load(relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(migs), 6, "the engine line has at least versions 1..6")
	var want []int
	for _, m := range migs {
		want = append(want, m.Version)
	}
	require.Equal(t, want, versions, "every version of the engine line is applied")
}
