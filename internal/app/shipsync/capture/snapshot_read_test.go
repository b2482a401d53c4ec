package capture_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
)

// TestSnapshotReader reads a table with a two-column key (text, then
// number) in chunks, resuming each from the last key alone, and requires
// every row exactly once in key order, decoded as a read record with every
// column typed as the capture types a change; a table the capture cannot
// take is refused with its reason.
func TestSnapshotReader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, name := scratchDB(t, mariaServer())
	_, err := db.ExecContext(ctx, "CREATE TABLE watch (deck VARCHAR(8) NOT NULL, slot INT NOT NULL, "+
		"officer VARCHAR(40) NULL, hours DECIMAL(5,2) NOT NULL, PRIMARY KEY (deck, slot), "+apply.SyncColumns+")")
	require.NoError(t, err)
	var want []string
	for _, deck := range []string{"bridge", "aft", "Engine"} {
		for slot := 10; slot >= 1; slot-- {
			_, err := db.ExecContext(ctx, "INSERT INTO watch VALUES (?, ?, ?, ?, UUID(), 'ship-7', NULL, NOW(6))",
				deck, slot, fmt.Sprintf("officer %s %d", deck, slot), fmt.Sprintf("%d.25", slot))
			require.NoError(t, err)
		}
	}
	// Key order as the database sorts it (its collation: case-insensitive).
	rows, err := db.QueryContext(ctx, "SELECT CONCAT(deck, '/', slot) FROM watch ORDER BY deck, slot")
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		want = append(want, k)
	}
	require.NoError(t, rows.Err())
	rows.Close()

	r, err := capture.NewSnapshotReader(ctx, db, logical, name, "watch")
	require.NoError(t, err)
	require.Equal(t, []string{"deck", "slot"}, r.KeyColumns())
	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	var got []string
	var cursor [][]byte
	chunks := 0
	for {
		recs, err := r.Chunk(ctx, cursor, 7, t0)
		require.NoError(t, err)
		chunks++
		for _, rec := range recs {
			ev, err := dec.Decode(cdc.Message{Topic: "sync.cdc." + logical + "." + name + ".watch", Key: rec.Key, Value: rec.Value})
			require.NoError(t, err)
			require.Equal(t, cdc.OpRead, ev.Op)
			require.Nil(t, ev.Before)
			require.Equal(t, cdc.SnapshotTrue, ev.Source.Snapshot)
			require.Equal(t, t0, ev.Source.Timestamp)
			c := cols(ev.After)
			require.Equal(t, c["hours"].GetDecimalValue(), fmt.Sprintf("%d.25", c["slot"].GetIntValue()))
			require.Len(t, ev.Key, 2)
			got = append(got, fmt.Sprintf("%s/%d", ev.Key[0].GetStringValue(), ev.Key[1].GetIntValue()))
			cursor = rec.Cursor
		}
		if len(recs) < 7 {
			break
		}
	}
	require.Equal(t, want, got, "every row once, in key order")
	require.Equal(t, 5, chunks, "30 rows in chunks of 7: 4 full, 1 short")

	_, err = db.ExecContext(ctx, "CREATE TABLE nokey (a INT, "+apply.SyncColumns+")")
	require.NoError(t, err)
	_, err = capture.NewSnapshotReader(ctx, db, logical, name, "nokey")
	var te *capture.TableError
	require.ErrorAs(t, err, &te)
	require.Contains(t, te.Error(), "primary key")
	_, err = r.Chunk(ctx, [][]byte{[]byte("x")}, 7, t0)
	require.ErrorContains(t, err, "cursor has 1 values for a 2-column key")
}
