package relaypgx_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// upTo returns the engine line's migration files up to version max.
func upTo(t *testing.T, src fs.FS, max string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() > max {
			return err
		}
		b, err := fs.ReadFile(src, path)
		out[path] = &fstest.MapFile{Data: b}
		return err
	}))
	return out
}

// TestUpgradeRenamesQueueColumn upgrades a schema written before the rename
// of "pipeline" to "queue": rows written under the old column are read
// through the driver afterwards.
func TestUpgradeRenamesQueueColumn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, err := relaypgx.Open(ctx, testdb.PGSchema(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	clock := relayclock.NewFake(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))

	old := relaymigrate.Line{Name: relaymigrate.EngineLine, FS: upTo(t, d.MigrationFS(), "006_~")}
	res, err := relaymigrate.Up(ctx, d, clock, old)
	require.NoError(t, err)
	require.Len(t, res.Applied, 6)
	_, err = d.Pool().Exec(ctx, `INSERT INTO relay_cursor (pipeline, watermark, updated_at) VALUES ('q', 41, now())`)
	require.NoError(t, err)

	renamed := relaymigrate.Line{Name: relaymigrate.EngineLine, FS: upTo(t, d.MigrationFS(), "007_~")}
	res, err = relaymigrate.Up(ctx, d, clock, renamed)
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)
	require.True(t, strings.Contains(res.Applied[0].Name, "queue"), "applied %+v", res.Applied[0])

	cur, err := d.GetExecutor().CursorGet(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(41), cur.Watermark)

	// Version 8 adds the late-row columns: a hole logged before reads as not
	// found and not ingested.
	_, err = d.Pool().Exec(ctx, `INSERT INTO relay_hole (queue, id, first_seen_at, released_at) VALUES ('q', 40, now(), now())`)
	require.NoError(t, err)
	res, err = relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)
	require.True(t, strings.Contains(res.Applied[0].Name, "hole_late"), "applied %+v", res.Applied[0])
	hs, err := d.GetExecutor().HoleList(ctx, "q")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.True(t, hs[0].FoundAt.IsZero())
	require.True(t, hs[0].IngestedAt.IsZero())
}
