package relaywork_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaywork"
)

// Completion work per submit attempt: every receipt is stored together with
// a Bump of its submit's work row; a worker claims the row, recomputes the
// outcome from all stored receipts and commits it under Lock + Done. A
// receipt that arrives while the worker runs leaves the row pending, so the
// next claim sees it. (Runs on the local PostgreSQL, in a scratch schema.)
func Example() {
	ctx := context.Background()
	url, drop := scratchSchema(ctx)
	defer drop()
	d, err := relaypgx.Open(ctx, url)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	clock := relayclock.NewFake(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	if _, err := relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d), relaywork.MigrationLine()); err != nil {
		panic(err)
	}
	pool := d.Pool()
	if _, err := pool.Exec(ctx, `CREATE TABLE receipt (submit text, segment int, status text);
		CREATE TABLE completion (submit text PRIMARY KEY, delivered int, total int)`); err != nil {
		panic(err)
	}
	work, err := relaywork.New(pool, relaywork.Config{Queue: "sms-completion", Clock: clock})
	if err != nil {
		panic(err)
	}

	// storeReceipt is the fact's transaction: the work row first, then the fact.
	storeReceipt := func(submit string, segment int) {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := work.Bump(ctx, tx, []string{submit}); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO receipt VALUES ($1, $2, 'DELIVRD')", submit, segment)
			return err
		})
		if err != nil {
			panic(err)
		}
	}
	// complete is the worker's side-effect transaction: Lock first, Done last.
	complete := func(c relaywork.Claim) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := work.Lock(ctx, tx, c); err != nil {
				return err // ErrFenced: another worker holds the row now
			}
			var delivered int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM receipt WHERE submit = $1", c.Key).Scan(&delivered); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO completion VALUES ($1, $2, 2)
				ON CONFLICT (submit) DO UPDATE SET delivered = excluded.delivered`, c.Key, delivered); err != nil {
				return err
			}
			fmt.Printf("%s: revision %d, %d of 2 segments delivered\n", c.Key, c.Revision, delivered)
			return work.Done(ctx, tx, c, time.Time{})
		})
	}
	state := func(key string) {
		r, err := work.Get(ctx, key)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s, revision %d, processed %d\n", key, r.State, r.Revision, r.ProcessedRevision)
	}

	storeReceipt("submit-7", 1)
	claims, err := work.Claim(ctx, "worker-a", 10)
	if err != nil {
		panic(err)
	}
	// The second segment's receipt arrives after the claim: worker-a's run
	// reads it (it committed before Lock), and the row still goes back to
	// pending, since the claim was for revision 1. A receipt that came after
	// Lock would wait for worker-a's commit and re-arm the row the same way:
	// either way no fact is left unprocessed.
	storeReceipt("submit-7", 2)
	if err := complete(claims[0]); err != nil {
		panic(err)
	}
	state("submit-7")

	claims, err = work.Claim(ctx, "worker-a", 10)
	if err != nil {
		panic(err)
	}
	if err := complete(claims[0]); err != nil {
		panic(err)
	}
	state("submit-7")

	// A stale holder is refused.
	err = complete(claims[0])
	fmt.Println("again with the old claim:", errors.Is(err, relaywork.ErrFenced))

	// Output:
	// submit-7: revision 1, 2 of 2 segments delivered
	// submit-7: pending, revision 2, processed 1
	// submit-7: revision 2, 2 of 2 segments delivered
	// submit-7: idle, revision 2, processed 2
	// again with the old claim: true
}

// scratchSchema creates a schema on the test PostgreSQL (testdb.PGURL) and
// returns a URL selecting it and its drop. It panics when the server cannot
// be reached: the example fails, it never skips.
func scratchSchema(ctx context.Context) (string, func()) {
	base := testdb.PGURL()
	schema := fmt.Sprintf("example_work_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		panic(fmt.Sprintf("PostgreSQL at %s: %v", dsn.Redact(base), dsn.Scrub(err, base)))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		panic(err)
	}
	url, err := dsn.WithParam(base, "search_path", schema)
	if err != nil {
		panic(err)
	}
	return url, func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			panic(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			panic(err)
		}
	}
}
