package cli

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

func runMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "migrate", "migrate --store URL")
	store := fs.String("store", envOr("RELAY_STORE", ""), "store: postgres://…, a keyword/value DSN (host=… dbname=…), sqlite:PATH or a path like ./relay.db; env RELAY_STORE")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := openStore(ctx, *store)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	if err != nil {
		return err
	}
	for _, m := range res.Applied {
		fmt.Fprintf(env.Stdout, "applied %s/%03d_%s\n", m.Line, m.Version, m.Name)
	}
	fmt.Fprintf(env.Stdout, "schema up to date (%d applied)\n", len(res.Applied))
	return nil
}
