package converge

import (
	"context"
	"net/url"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/remote"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/shorecdc"
	"github.com/relayhq/relay/relayclock"
)

// clock is the harness's clock (the parts' business times are real).
var clock = relayclock.System{}

// startInProcess runs the shore (data API and applier), the shore CDC
// consumer, the arbiter and the ship client with its remote applier in
// this process.
func (r *run) startInProcess(ctx context.Context, start func(string, func(context.Context) error), cleanup *[]func()) error {
	sh, err := shipdemo.StartShore(ctx, shipdemo.ShoreOptions{PostgresURL: r.o.PostgresURL, TargetDSN: r.shoreDSN,
		PKIDir: filepath.Join(r.o.Dir, "pki"), Node: shipdemo.Node, Rules: shoreRules(), Logger: r.o.Logger})
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, sh.Close)
	r.pool = sh.PG.Pool()
	if err := r.startShoreSide(start); err != nil {
		return err
	}
	u, err := url.Parse(sh.URL)
	if err != nil {
		return err
	}
	return r.startShipSide(ctx, u.Host, start, cleanup)
}

// startShoreSide runs the shore CDC consumer and the arbiter.
func (r *run) startShoreSide(start func(string, func(context.Context) error)) error {
	rs, err := normalize.NewRuleSet(shipdemo.ShoreSideRules(r.shoreName, normalize.DirectionBoth)...)
	if err != nil {
		return err
	}
	dl := shore.NewDownlink(r.pool, clock)
	n, err := shorecdc.NewNormalizer(ShoreNode, "capture-shore", 0, rs, dl)
	if err != nil {
		return err
	}
	dec, err := cdc.New(cdc.Config{})
	if err != nil {
		return err
	}
	cdcc, err := shorecdc.New(shorecdc.Config{Brokers: r.brokers, TopicPrefix: capture.TopicPrefixDefault + ".shore.",
		Group: shoreCDCGroup, Downlink: dl, Decoder: dec, Normalizer: n, Clock: clock, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	start("shore cdc consumer", cdcc.Run)
	t, err := apply.OpenTarget(r.shoreDSN)
	if err != nil {
		return err
	}
	arb, err := arbiter.New(arbiter.Config{Pool: r.pool, Target: t, ShoreNode: ShoreNode, Instance: "converge-arbiter",
		Clock: clock, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	start("arbiter", func(ctx context.Context) error {
		defer t.Close()
		return arb.Run(ctx, 100*time.Millisecond)
	})
	return nil
}

// startShipSide runs a flapping link to the shore's data API at shoreAddr
// and the ship client with its remote applier.
func (r *run) startShipSide(ctx context.Context, shoreAddr string, start func(string, func(context.Context) error),
	cleanup *[]func()) error {
	addr, err := r.startLink(ctx, shoreAddr, cleanup)
	if err != nil {
		return err
	}
	rs, err := normalize.NewRuleSet(shipRules(r.shipName)...)
	if err != nil {
		return err
	}
	st, err := client.OpenStore(ctx, filepath.Join(r.o.Dir, "client.db"), clientGroup, clock)
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = st.Close() })
	tc, err := pki.Dir{Path: filepath.Join(r.o.Dir, "pki")}.ClientTLS("node-" + shipdemo.Node)
	if err != nil {
		return err
	}
	tr, err := client.NewTransport("https://"+addr, tc, 10*time.Second)
	if err != nil {
		return err
	}
	t, err := apply.OpenTarget(r.shipDSN)
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = t.Close() })
	if err := t.EnsureLedger(ctx); err != nil {
		return err
	}
	ra, err := remote.New(remote.Config{Target: t, Rules: rs, Clock: clock, ShoreNodeID: ShoreNode, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	cl, err := client.Build(client.Parts{NodeID: shipdemo.Node, ConnectorID: "capture-" + shipdemo.Logical, Rules: rs,
		Store: st, Transport: tr, Clock: clock, Logger: r.o.Logger},
		client.Config{Brokers: r.brokers, TopicPrefix: shipdemo.TopicPrefix, ReceiptEvery: 200 * time.Millisecond,
			Remote: ra, CommandPollEvery: 200 * time.Millisecond,
			Backoff: client.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}})
	if err != nil {
		return err
	}
	start("ship client", func(ctx context.Context) error {
		defer tr.Close()
		return cl.Run(ctx)
	})
	return nil
}
