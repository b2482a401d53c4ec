package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaymigrate"
)

// runBenchShipsyncIngress measures the shore's ingress: several nodes upload
// batches of new events concurrently over mutual TLS on loopback into the
// PostgreSQL inbox (a scratch schema, dropped afterwards), and it prints the
// events received (committed and answered) per second.
func runBenchShipsyncIngress(ctx context.Context, env *Env, args []string) error {
	setServerGOGC() // the shore runs in this process, as relay shipsync shore would
	fs := newFlags(env, "bench shipsync-ingress", "bench shipsync-ingress [--nodes 4] [--batches 200] [--events 500] "+
		"[--apply-workers 4] [--apply-batch 64] [--postgres URL] [--mariadb DSN] [--cpuprofile FILE] [--receive-cpuprofile FILE]")
	nodes := fs.Int("nodes", 4, "nodes uploading at once (one connection each)")
	batches := fs.Int("batches", 200, "batches in all")
	perBatch := fs.Int("events", 500, "events per batch (1 … 500)")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (a scratch schema is made and dropped)")
	mariadb := fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault),
		"MariaDB server the applier writes (a scratch database is made and dropped); empty: measure ingress only")
	workers := fs.Int("apply-workers", apply.WorkersDefault, "applier batches in flight")
	txBatch := fs.Int("apply-batch", apply.TxBatchDefault, "events per apply transaction (one target round trip)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process during the apply phase to this file")
	recvProfile := fs.String("receive-cpuprofile", "", "write a CPU profile of this process during the receive phase "+
		"(the shore and the bench's HTTPS clients) to this file")
	keep := fs.Bool("keep", false, "keep the scratch schema (its name is printed), to look at the plans afterwards")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *batches < 1 || *perBatch < 1 || *perBatch > wire.MaxEventsDefault || *workers < 1 || *txBatch < 1 {
		return errors.New("bench shipsync-ingress: --nodes, --batches, --apply-workers, --apply-batch must be ≥ 1, --events 1 … 500")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	schema := "relay_bench_shipsync_" + hex.EncodeToString(rnd[:])
	url, drop, err := scratchSchema(ctx, *pgURL, schema)
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(env.Stdout, "bench shipsync-ingress: schema %s kept\n", schema)
	} else {
		defer drop()
	}
	// The pool's sessions are named after the schema, so the receive and
	// apply phases' costs can find their backends (benchCPU, applyCost).
	if url, err = dsn.WithParam(url, "application_name", schema); err != nil {
		return err
	}
	d, err := relaypgx.Open(ctx, url)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if _, err := relaymigrate.Up(ctx, d, clock, shore.MigrationLines(d)...); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-bench-shipsync-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := pki.Dir{Path: filepath.Join(dir, "pki"), Clock: clock}
	if _, err := p.InitCA(); err != nil {
		return err
	}
	if _, err := p.IssueServer(nil); err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	clients := make([]*http.Client, *nodes)
	roots, err := certPool(filepath.Join(p.Path, pki.CACertFile))
	if err != nil {
		return err
	}
	for i := range *nodes {
		id := fmt.Sprintf("bench-%d", i)
		c, err := p.IssueNode(id, "")
		if err != nil {
			return err
		}
		if _, err := reg.Add(ctx, c, shore.Audit{Actor: "bench"}); err != nil {
			return err
		}
		if err := reg.AllowRule(ctx, id, uploadRule, 1, shore.Audit{Actor: "bench"}); err != nil {
			return err
		}
		if i == 0 {
			if err := reg.RegisterRule(ctx, uploadRuleDef, shore.Audit{Actor: "bench"}); err != nil {
				return err
			}
		}
		cf, kf := pki.NodeFiles("node-" + id)
		kp, err := tls.LoadX509KeyPair(filepath.Join(p.Path, cf), filepath.Join(p.Path, kf))
		if err != nil {
			return err
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		clients[i] = &http.Client{Transport: tr, Timeout: 60 * time.Second}
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return err
	}
	inbox, err := shore.NewInbox(d, codec, clock)
	if err != nil {
		return err
	}
	h, err := shore.NewHandler(shore.Config{Registry: reg, Inbox: inbox, Codec: codec,
		Clock: clock, Limits: shore.Limits{NodeRate: 1e6, GlobalRate: 1e6, NodeConcurrency: 4},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	sc, err := tls.LoadX509KeyPair(filepath.Join(p.Path, pki.ServerCertFile), filepath.Join(p.Path, pki.ServerKeyFile))
	if err != nil {
		return err
	}
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "bench shore", Addr: "127.0.0.1:0", Handler: h,
		TLS: shore.ServerTLS(sc, roots, clock), MaxBodyBytes: 8 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve() }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	// Bodies are encoded before the clock starts: the shore is measured,
	// not the ship's encoder.
	now := clock.Now()
	bodies := make([][]byte, *batches)
	for n := range bodies {
		node := fmt.Sprintf("bench-%d", n%*nodes)
		evs := make([]*pb.ChangeEvent, *perBatch)
		for i := range evs {
			// Each node's batches go in order, so its stream is contiguous.
			evs[i] = syntheticEvent(node, (n / *nodes)**perBatch+i+1, now)
			// Records of their own per node: id = node × 10⁹ + i.
			id := int64(n%*nodes)*1_000_000_000 + evs[i].PrimaryKey[0].GetIntValue()
			evs[i].PrimaryKey[0].Value = &pb.ColumnValue_IntValue{IntValue: id}
			evs[i].After.Columns[0].Value = &pb.ColumnValue_IntValue{IntValue: id}
		}
		var id [16]byte
		_, _ = rand.Read(id[:])
		if bodies[n], err = codec.Encode(&wire.Batch{NodeID: node, BatchID: formatUUID(id), Sequence: uint64(n + 1),
			CreatedAt: now, Events: evs}); err != nil {
			return err
		}
	}
	fmt.Fprintf(env.Stdout, "bench shipsync-ingress: %d nodes, %d batches of %d events over mutual TLS on %s\n",
		*nodes, *batches, *perBatch, srv.URL())
	stopProfile, err := startCPUProfile(*recvProfile)
	if err != nil {
		return err
	}
	cpu0, err := benchCPU(ctx, d.Pool(), schema)
	if err != nil {
		return err
	}
	start := time.Now() // a benchmark measures wall time
	var wg sync.WaitGroup
	errs := make(chan error, *nodes)
	for w := range *nodes {
		wg.Go(func() {
			for n := w; n < *batches; n += *nodes {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+shore.PathBatches, bytes.NewReader(bodies[n]))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", shore.ContentType)
				resp, err := clients[w].Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("batch %d: HTTP %d", n, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start) // a benchmark measures wall time
	cpu1, err := benchCPU(ctx, d.Pool(), schema)
	stopProfile()
	if err != nil {
		return err
	}
	close(errs)
	for err := range errs {
		return fmt.Errorf("bench shipsync-ingress: %w", err)
	}
	total := 0
	for i := range *nodes {
		n, err := inbox.InboxCount(ctx, fmt.Sprintf("bench-%d", i))
		if err != nil {
			return err
		}
		total += n
	}
	if want := *batches * *perBatch; total != want {
		return fmt.Errorf("bench shipsync-ingress: the inbox holds %d events, want %d", total, want)
	}
	fmt.Fprintf(env.Stdout, "bench shipsync-ingress: %d events received in %s: %.0f events/s (%.1f batches/s); inbox checked: %d rows\n",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), float64(*batches)/elapsed.Seconds(), total)
	fmt.Fprintf(env.Stdout, "bench shipsync-ingress: receive CPU: %s\n", cpu1.since(cpu0, total))
	if *mariadb == "" {
		return nil
	}
	return benchApply(ctx, env, d, *mariadb, total, *workers, *txBatch, *cpuProfile, *pgURL, schema)
}

// uploadRuleDef is the shore side of uploadRule: item rows (id, note) into
// the shore table item.
var uploadRuleDef = shore.Rule{ID: uploadRule, Version: 1, SourceTable: "item", TargetTable: "item",
	KeyColumns: []string{"id"}, Columns: []string{"id", "note"}, InsertOverTombstone: true}

// benchApply applies the received backlog (total events) to a scratch
// MariaDB database and prints the events applied per second, from the
// applier's start until every event has its receipt, and what the phase
// cost per event (applyCost; statsURL reaches the server without the
// pool, whose sessions are named app).
func benchApply(ctx context.Context, env *Env, d *relaypgx.Driver, server string, total, workers, txBatch int,
	cpuProfile, statsURL, app string) error {
	scratch, drop, err := mysqldsn.CreateScratch(ctx, server, "relay_bench_shipsync_"+randomHex(4))
	if err != nil {
		return fmt.Errorf("--mariadb: %w", err)
	}
	defer drop()
	target, err := apply.OpenTarget(scratch)
	if err != nil {
		return err
	}
	defer target.Close()
	if _, err := target.DB().ExecContext(ctx, "CREATE TABLE item (id BIGINT PRIMARY KEY, note VARCHAR(64), "+
		apply.SyncColumns+")"); err != nil {
		return err
	}
	if err := target.EnsureLedger(ctx); err != nil {
		return err
	}
	a, err := apply.New(apply.Config{Driver: d, Target: target, Clock: relayclock.System{}, InstanceID: "bench",
		Workers: workers, TxBatch: txBatch, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	// The ingress's sessions close (their backends flush their statistics
	// as they exit), so the apply phase starts with sessions of its own.
	d.Pool().Reset()
	cost, err := startApplyCost(ctx, statsURL, app, target.DB())
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	start := time.Now() // a benchmark measures wall time
	if err := a.Start(ctx); err != nil {
		return err
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		_ = a.Stop(sctx)
	}
	defer stop()
	// The poll reads the largest receipt id (one index probe) and counts the
	// receipts only once it reaches total: receipt ids have gaps (a rolled
	// back batch uses some up), so the largest id is never below the count.
	// Counting every 20 ms instead scanned the whole receipt table each time,
	// and the bench's own polling was a good part of PostgreSQL's CPU.
	var done int
	for done < total {
		var top int
		if err := d.Pool().QueryRow(ctx, "SELECT coalesce(max(receipt_id), 0) FROM sync_event_receipt").Scan(&top); err != nil {
			return err
		}
		if top >= total {
			if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt").Scan(&done); err != nil {
				return err
			}
		}
		if done < total {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	elapsed := time.Since(start) // a benchmark measures wall time
	if err := cost.stopCPU(ctx, target.DB()); err != nil {
		return err
	}
	stopProfile()
	stop()
	d.Pool().Reset()
	var costs bytes.Buffer
	if err := cost.finish(ctx, &costs, total); err != nil {
		return err
	}
	var applied, rows int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt WHERE result = 'APPLIED'").Scan(&applied); err != nil {
		return err
	}
	if err := target.DB().QueryRowContext(ctx, "SELECT count(*) FROM item").Scan(&rows); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "bench shipsync-ingress: %d events applied in %s: %.0f events/s (%d workers, %d per transaction); "+
		"%d APPLIED receipts, %d target rows\n", total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		workers, txBatch, applied, rows)
	_, _ = costs.WriteTo(env.Stdout)
	if applied != total || rows != total {
		return fmt.Errorf("bench shipsync-ingress: %d applied, %d target rows, want %d", applied, rows, total)
	}
	return nil
}
