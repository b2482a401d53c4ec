package normalize_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// TestRuleByIDAndCarries: a rule is found by its id; the columns it
// carries follow its included or excluded list, never a platform column.
func TestRuleByIDAndCarries(t *testing.T) {
	t.Parallel()
	rs, err := normalize.NewRuleSet(
		normalize.Rule{ID: "a", Version: 1, Direction: normalize.DirectionBoth, Database: "ops", Table: "a",
			KeyColumns: []string{"id"}, IncludedColumns: []string{"id", "note"}, Revisioned: true},
		normalize.Rule{ID: "b", Version: 2, Direction: normalize.DirectionDownlink, Database: "ops", Table: "b",
			KeyColumns: []string{"id"}, ExcludedColumns: []string{"secret"}, Revisioned: true},
	)
	require.NoError(t, err)
	require.Equal(t, "a", rs.ByID("a").Table)
	require.Equal(t, uint64(2), rs.ByID("b").Version)
	require.Nil(t, rs.ByID("c"))
	require.Nil(t, (*normalize.RuleSet)(nil).ByID("a"))
	a, b := rs.ByID("a"), rs.ByID("b")
	require.True(t, a.Carries("note"))
	require.False(t, a.Carries("other"))
	require.False(t, b.Carries("secret"))
	require.True(t, b.Carries("other"))
	require.False(t, b.Carries("_SYNC_revision"))
}
