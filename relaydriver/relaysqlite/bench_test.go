package relaysqlite_test

import (
	"testing"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// BenchmarkProcessOne measures the store side of one FIFO step on SQLite:
// list the head, then complete it with its acknowledgement intent in a
// transaction.
func BenchmarkProcessOne(b *testing.B) {
	d := openB(b)
	ctx := b.Context()
	ex := d.GetExecutor()
	ps := make([]*relaydriver.MessageInsertParams, b.N)
	for i := range ps {
		ps[i] = &relaydriver.MessageInsertParams{Queue: "p", ID: int64(i + 1), Now: t0}
	}
	if _, err := ex.MessageInsertMany(ctx, ps); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		ms, err := ex.MessageListUnfinished(ctx, &relaydriver.MessageListUnfinishedParams{Queue: "p", Limit: 1})
		if err != nil || len(ms) != 1 || ms[0].ID != int64(i+1) {
			b.Fatal(err, ms)
		}
		tx, err := d.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: ms[0].ID,
			State: relaytype.StateSucceeded, AckIntent: true, Now: t0}); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
