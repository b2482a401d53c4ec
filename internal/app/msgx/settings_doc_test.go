package msgx_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
)

// TestSettingsDocIsCurrent keeps docs/msgx/settings.md true: its table is
// exactly what `relay msgx params --markdown` prints for the defaults.
func TestSettingsDocIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/msgx/settings.md")
	require.NoError(t, err)
	cfg := msgx.Defaults()
	var table bytes.Buffer
	require.NoError(t, msgx.WriteParamsMarkdown(&table, &cfg))
	require.Contains(t, string(doc), table.String(),
		"regenerate the table with `go run ./cmd/relay msgx params --markdown`")
}
