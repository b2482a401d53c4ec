package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncRetain runs the shore's retention: once, or every --every
// until stopped.
func runShipsyncRetain(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync retain", "shipsync retain [--postgres URL] [--every 1h] [--samples 720h] "+
		"[--batches 720h] [--bodies 720h] [--idempotency 168h]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	every := fs.Duration("every", 0, "run a pass this often until stopped (0: one pass)")
	var pol shore.Retention
	fs.DurationVar(&pol.Samples, "samples", shore.RetainSamplesDefault, "keep heartbeat throughput samples this long")
	fs.DurationVar(&pol.Batches, "batches", shore.RetainBatchesDefault, "keep the answers of upload batches this long")
	fs.DurationVar(&pol.Bodies, "bodies", shore.RetainBodiesDefault, "keep the row images of settled inbox events "+
		"this long (events without a result or with an active conflict on their record are never trimmed)")
	fs.DurationVar(&pol.Idempotency, "idempotency", shore.RetainIdempotencyDefault, "keep management API idempotency keys this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync retain: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	const floor = 24 * time.Hour // the ETA reads a day of samples; nothing shorter is sensible
	if pol.Samples < floor || pol.Batches < time.Hour || pol.Bodies < time.Hour || pol.Idempotency < time.Hour ||
		*every < 0 {
		return errors.New("shipsync retain: --samples must be ≥ 24h, --batches, --bodies and --idempotency ≥ 1h, --every ≥ 0")
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, false, "shipsync retain", shore.MigrationLines(d)...); err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	for {
		got, err := reg.Retain(ctx, pol)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fmt.Fprintf(env.Stdout, "%s retention: %s\n", clock.Now().UTC().Format(time.RFC3339), got)
		if *every == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clock.After(*every):
		}
	}
}
