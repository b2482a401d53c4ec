package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/remote"
	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncClient runs the ship client: topic → normalise → SQLite state
// → upload → receipts.
func runShipsyncClient(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync client", "shipsync client --brokers HOST:PORT --logical NAME --rules FILE --url URL "+
		"--ca FILE --cert FILE --key FILE [--state FILE]")
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka-API brokers of the ship's CDC queue, comma-separated")
	logical := fs.String("logical", "", "the capture's logical name: topics sync.cdc.<logical>.<db>.<table> are consumed. Required")
	rulesFile := fs.String("rules", "", "the node's rules file (JSON, docs/shipsync/normalize.md). Required")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file (created if absent)")
	url := fs.String("url", "https://"+shipsyncShoreAddrDefault, "base URL of the shore")
	caFile := fs.String("ca", "", "PEM CA the shore's certificate is verified against. Required")
	certFile := fs.String("cert", "", "the node's PEM certificate (its identity is the node id). Required")
	keyFile := fs.String("key", "", "PEM private key of --cert. Required")
	connector := fs.String("connector-id", "", "source_connector_id of the events (default capture-<logical>)")
	epoch := fs.Uint("replay-epoch", 0, "replay generation, part of every event id: raise it only for a controlled replay "+
		"(a rebuilt topic or a reset connector)")
	group := fs.String("group", "", "consumer group (default shipsync-client-<node>)")
	instance := fs.String("group-instance-id", "", "static membership of the consumer group (KIP-345): a client "+
		"restarted under the same id takes its partitions back at once instead of after the session timeout (empty: dynamic)")
	receiptEvery := fs.Duration("receipt-every", time.Second, "how often receipts are pulled while events wait for them")
	inWindow := fs.Int("window", client.WindowDefault, "events of one partition read and not yet terminal before reading it "+
		"pauses (those the shore received take a few dozen bytes each until their receipt)")
	maxTracked := fs.Int("max-tracked", client.MaxTrackedDefault, "events read and not yet terminal over all partitions "+
		"before reading pauses (about 45 B each once the shore received them)")
	rate := fs.Int64("upload-rate", 0, "upload limit in bytes per second on the wire (after compression); 0: unmetered")
	burst := fs.Int64("upload-burst", 0, "upload burst in bytes (0: one second of --upload-rate)")
	bulkWindow := fs.String("bulk-window", "", "when BULK rules may transfer, e.g. \"Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00\" "+
		"(empty: always); other classes are not limited")
	zone := fs.String("time-zone", "UTC", "IANA time zone of --bulk-window")
	typesFile := fs.String("types", "", "JSON file typing the columns of envelopes without a schema: "+
		"{\"db.table\": {\"column\": {\"Type\": \"int64\", \"Name\": \"\", \"Scale\": 0, \"Required\": true}}} (docs/shipsync/cdc.md)")
	backoffCap := fs.Duration("backoff-cap", client.BackoffCapDefault, "longest wait between retries of a failed request "+
		"(full jitter from 1 s, doubling)")
	uploads := fs.Int("uploads", client.UploadsDefault, "batches in flight at once: they must cover what the link carries "+
		"in a round trip (the shore's --node-concurrency must allow them, plus four for receipts, heartbeats and commands)")
	laneInFlight := fs.Int("partition-in-flight", 0, "batches of one partition in flight at once (0: as --uploads)")
	memProfile := fs.String("memprofile", "", "write a heap profile to this file whenever the heap in use reaches a new "+
		"peak (checked every 2 s)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (written when the "+
		"client stops)")
	memLimit := fs.Int64("memory-limit", 64<<20, "soft limit of the Go heap in bytes (the runtime collects harder near "+
		"it; GOMEMLIMIT, when set, wins); 0: none")
	every := fs.Duration("progress-every", 10*time.Second, "print a progress line this often (0: never)")
	logLevel := fs.String("log-level", "info", "debug, info, warn, error or off")
	fullAnswers := fs.Bool("full-answers", false, "ask the shore for full answers (every event id as text, receipts "+
		"with applied revision and time) instead of compact ones; costs more bytes down the link")
	shipDB := fs.String("ship-db", envOr("SHIPSYNC_SHIP_DB", ""), "the ship's business database (go-sql-driver DSN, "+
		"user:pw@tcp(host:3306)/db; default $SHIPSYNC_SHIP_DB): with it the client pulls the shore's downlink commands, "+
		"applies them there and acknowledges them, and runs the snapshot tasks (relay shipsync snapshot start) reading "+
		"it; without it no command is pulled and no snapshot runs")
	shoreNode := fs.String("shore-node-id", remote.ShoreNodeIDDefault, "the shore's node id: the _sync_origin a "+
		"conflict decision's write carries on the ship")
	commandPoll := fs.Duration("command-poll", client.CommandPollEveryDefault, "how often the downlink asks for "+
		"commands when the shore had none ready (a page with more after it is followed at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync client: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *receiptEvery <= 0 {
		return errors.New("shipsync client: --receipt-every must be positive")
	}
	var kopts []kgo.Opt
	if *instance != "" {
		kopts = append(kopts, kgo.InstanceID(*instance))
	}
	if *logical == "" || *rulesFile == "" || *caFile == "" || *certFile == "" || *keyFile == "" {
		return errors.New("shipsync client: --logical, --rules, --ca, --cert and --key are required")
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	tc, node, err := nodeTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	rules, err := loadRulesFlag("rules", *rulesFile)
	if err != nil {
		return err
	}
	types, err := loadTypesFlag("types", *typesFile)
	if err != nil {
		return err
	}
	var window *flow.Window
	if *bulkWindow != "" {
		loc, err := time.LoadLocation(*zone)
		if err != nil {
			return fmt.Errorf("--time-zone: %w", err)
		}
		if window, err = flow.ParseWindow(*bulkWindow, loc); err != nil {
			return fmt.Errorf("--bulk-window: %w", err)
		}
	}
	clock := relayclock.System{}
	started := time.Now()
	st, err := client.OpenStore(ctx, *state, cmp.Or(*group, "shipsync-client-"+node), clock)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	tr, err := client.NewTransport(*url, tc, 0)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	tr.FullAnswers = *fullAnswers
	defer tr.Close()
	var applier client.RemoteApplier
	if *shipDB != "" {
		target, err := apply.OpenTarget(*shipDB)
		if err != nil {
			return fmt.Errorf("--ship-db: %w", err)
		}
		defer target.Close()
		if err := target.EnsureLedger(ctx); err != nil {
			return fmt.Errorf("--ship-db: %w", err)
		}
		if applier, err = remote.New(remote.Config{Target: target, Rules: rules, Clock: clock, ShoreNodeID: *shoreNode,
			Logger: log}); err != nil {
			return err
		}
	}
	parts := client.Parts{NodeID: node, ConnectorID: cmp.Or(*connector, "capture-"+*logical),
		ReplayEpoch: uint32(*epoch), Rules: rules, Store: st, Transport: tr, Clock: clock, Logger: log, Types: types}
	var barrier client.Barrier
	var snaps *shipsyncSnapshots
	var metered *client.Client // the snapshot uploads share its upload limit
	if *shipDB != "" {
		// Snapshot tasks read the ship database (docs/shipsync/snapshot.md).
		if snaps, err = newShipsyncSnapshots(ctx, *shipDB, *logical, splitList(*brokers), parts, &metered, log); err != nil {
			return err
		}
		defer snaps.Close()
		parts.Wrap, barrier = snaps.Wrap, snaps.Runner
	}
	c, err := client.Build(parts,
		client.Config{Barrier: barrier, Brokers: splitList(*brokers), TopicPrefix: "sync.cdc." + *logical + ".", Group: *group, Window: *inWindow,
			MaxTracked: *maxTracked,
			UploadRate: *rate, UploadBurst: *burst, BulkWindow: window, Backoff: client.Backoff{Cap: *backoffCap},
			Uploads: *uploads, LaneInFlight: *laneInFlight, ReceiptEvery: *receiptEvery, KafkaOpts: kopts,
			Remote: applier, CommandPollEvery: *commandPoll,
			Monotonic: func() time.Duration { return time.Since(started) }})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "shipsync client: node %s consuming sync.cdc.%s.* from %s, uploading to %s\n",
		node, *logical, *brokers, *url)
	if applier != nil {
		fmt.Fprintln(env.Stdout, "shipsync client: downlink on: the shore's commands are applied to --ship-db")
	}
	if *every > 0 {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-clock.After(*every):
					fmt.Fprintln(env.Stdout, "shipsync client: "+c.Progress())
				}
			}
		}()
	}
	if *memLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(*memLimit)
	}
	if *memProfile != "" {
		go profilePeaks(ctx, clock, *memProfile, log)
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return fmt.Errorf("shipsync client: --cpuprofile: %w", err)
	}
	defer stopProfile()
	if snaps != nil {
		metered = c
		go func() { _ = snaps.Runner.Run(ctx) }() // logs its failed steps and retries them; nil at the end
	}
	return c.Run(ctx)
}

// profilePeaks writes a heap profile to path each time the heap in use
// reaches a new peak, checking every 2 s until ctx ends.
func profilePeaks(ctx context.Context, clock relaytype.Clock, path string, log *slog.Logger) {
	var peak uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(2 * time.Second):
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse <= peak {
			continue
		}
		peak = ms.HeapInuse
		if err := writeHeapProfile(path); err != nil {
			log.Warn("shipsync client: heap profile", "err", err)
			return
		}
	}
}

// nodeTLS reads the node's certificate, key and the shore's CA: the TLS
// client config and the node id the certificate names.
func nodeTLS(caFile, certFile, keyFile string) (*tls.Config, string, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("--cert: %w", err)
	}
	leaf, err := pki.ReadCert(certFile)
	if err != nil {
		return nil, "", err
	}
	node, err := pki.NodeID(leaf)
	if err != nil {
		return nil, "", fmt.Errorf("--cert: %w", err)
	}
	roots, err := certPool(caFile)
	if err != nil {
		return nil, "", fmt.Errorf("--ca: %w", err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, node, nil
}
