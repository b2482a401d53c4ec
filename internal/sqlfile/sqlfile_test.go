package sqlfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	m, err := Parse("-- header comment\n-- name: A\n-- about A\nSELECT 1;\n\n-- name: B\nUPDATE t\n  SET x = $1;\n")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "SELECT 1", "B": "UPDATE t\n  SET x = $1"}, m)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	_, err := Parse("-- name: A\n-- only a comment\n")
	require.ErrorContains(t, err, `query "A" is empty`)
	_, err = Parse("-- name: A\nSELECT 1;\n-- name: A\nSELECT 2;\n")
	require.ErrorContains(t, err, `query "A" defined twice`)
	require.PanicsWithValue(t, `x.sql: lacks query "B"`, func() { MustParse("x.sql", "-- name: A\nSELECT 1;", "A", "B") })
}

func TestWithIdent(t *testing.T) {
	t.Parallel()
	got, err := WithIdent("SAVEPOINT {{ident}}", "sp_1")
	require.NoError(t, err)
	require.Equal(t, "SAVEPOINT sp_1", got)
	for _, bad := range []string{"", "1sp", "sp 1", "sp;DROP TABLE x", `"sp"`, "a234567890123456789012345678901234567890123456789012345678901234"} {
		_, err := WithIdent("SAVEPOINT {{ident}}", bad)
		require.Error(t, err, bad)
	}
}
