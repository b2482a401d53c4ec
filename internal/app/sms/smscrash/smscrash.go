package smscrash

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("smscrash/queries.sql", queriesSQL, "CountRows", "StateCounts", "Rows")

// Points are the gateway's fault points, in the order a command passes
// them. Each life the harness arms is armed at one of them.
var Points = []string{faultpoint.GatewayAfterClaim, faultpoint.GatewayAfterSubmit,
	faultpoint.GatewayAfterSettle, faultpoint.GatewayAfterResult}

// The figures of a full run (`relay sms crash` without flags), and the
// default Redis server.
const (
	// CommandsDefault is the number of distinct submitIds pushed.
	CommandsDefault = 20_000
	// DuplicatesDefault is the number of entries repeating a submitId.
	DuplicatesDefault = CommandsDefault / 50
	// KillsDefault is the number of lives ended by a SIGKILL at a random
	// moment.
	KillsDefault = 10
	// FaultLivesDefault is the number of lives armed at each fault point.
	FaultLivesDefault = 3
	// RedisAddrDefault is the Redis server of the streams.
	RedisAddrDefault = "127.0.0.1:6379"
)

// The child gateways' timing: short, so that the claims of a killed life
// turn stale, and its entries idle, within seconds (the gateway requires
// StaleClaim > SubmitTimeout and MinIdle > StaleClaim).
const (
	submitTimeout = 2 * time.Second
	staleClaim    = 3 * time.Second
	minIdle       = 4 * time.Second
	claimInterval = time.Second
)

// Lives. A random kill comes once the life has written a random share
// (killMinShare to killMaxShare) of the results its backlog calls for —
// measured in work, not time, so that the kills spread over the whole run
// on a fast machine and on a loaded one — or after lifeMax; a life armed at
// a fault point that has not reached it after lifeMax is killed then (and
// counted in Result.FaultMisses). progressPoll is how often the harness
// looks at the result stream's length.
const (
	killMinShare = 0.2
	killMaxShare = 0.9
	lifeMax      = 10 * time.Second
	progressPoll = 10 * time.Millisecond
)

// The channel and account the children use.
const (
	channelName = "cm"
	spID        = "901234"
)

// FaultProbabilityDefault is the chance that passing its armed point kills
// a life: a half, since a life passes a point once per batch, a few times.
const FaultProbabilityDefault = 0.5

// Options shape one harness run.
type Options struct {
	// Binary is the relay executable, run as `relay sms supplier` (once)
	// and `relay sms gateway` (every life); required.
	Binary string
	// PostgresURL is the gateways' PostgreSQL (a URL or keyword/value DSN);
	// required. Its schema must hold no gateway_submit row: the harness
	// applies the gateway's migration line and refuses a schema an earlier
	// run used, since submitIds are numbered from 1 in every run.
	PostgresURL string
	// RedisAddr is the Redis server (RedisAddrDefault). The run's streams
	// and group have names of their own and are deleted at the end.
	RedisAddr string
	// Dir holds the supplier's record and the channel's secret file;
	// required.
	Dir string
	// Commands is the number of distinct submitIds, 1 to Commands; at
	// least 1 (CommandsDefault for a full run).
	Commands int
	// Duplicates is the number of entries that repeat a submitId already
	// pushed, half right behind its first copy, half far behind it.
	Duplicates int
	// Kills is the number of lives ended by a SIGKILL at a random moment
	// (KillsDefault for a full run).
	Kills int
	// FaultLives is the number of lives armed at each of the four fault
	// points (FaultLivesDefault for a full run).
	FaultLives int
	// FaultProbability is the chance that passing the armed point kills an
	// armed life (0: FaultProbabilityDefault). The gateway passes each
	// point once per batch (one read's entries), so a life passes it only
	// a few times.
	FaultProbability float64
	// Seed makes the plan repeatable: the order of the entries, the
	// duplicates, the kinds and lengths of the lives, the consumer names,
	// the supplier's draws and the seeds of the fault points' draws (which
	// also mix in the child's process id). Timing, and so the exact counts,
	// still differ between runs.
	Seed uint64
	// Out receives progress lines; nil: none.
	Out io.Writer
}

func (o Options) withDefaults() Options {
	o.RedisAddr = cmp.Or(o.RedisAddr, RedisAddrDefault)
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Binary == "", o.PostgresURL == "", o.Dir == "":
		return errors.New("smscrash: Binary, PostgresURL and Dir are required")
	case o.Commands < 1, o.Duplicates < 0, o.Kills < 0, o.FaultLives < 0:
		return fmt.Errorf("smscrash: Commands %d must be positive, Duplicates %d, Kills %d, FaultLives %d not negative",
			o.Commands, o.Duplicates, o.Kills, o.FaultLives)
	case o.FaultProbability < 0 || o.FaultProbability > 1:
		return fmt.Errorf("smscrash: FaultProbability %g: want 0 to 1", o.FaultProbability)
	}
	return nil
}

// Result is what a run did and what the reconciliation found.
type Result struct {
	// Streams is the prefix of the run's stream and group names.
	Streams string
	// Commands, Duplicates and Entries: distinct submitIds, repeated
	// entries, and all entries pushed (their sum).
	Commands, Duplicates, Entries int
	// Lives counts the gateway processes started, the draining one
	// included; SameConsumer and NewConsumer count the restarts under the
	// previous life's consumer name and under a new one.
	Lives, SameConsumer, NewConsumer int
	// Kills counts the lives ended by a SIGKILL at a random moment;
	// FaultKills the lives a fault point ended, per point name; FaultMisses
	// the armed lives that had not reached their point after lifeMax
	// and were killed at that moment instead (also counted in Kills).
	Kills       int
	FaultKills  map[string]int
	FaultMisses int
	// FaultProbability is the probability the armed lives ran with.
	FaultProbability float64
	// Report is the reconciliation; nil when the run stopped before it.
	*Report
	// Elapsed is the wall time of the run, reconciliation included.
	Elapsed time.Duration
}

// TotalFaultKills is the sum of FaultKills.
func (r *Result) TotalFaultKills() int {
	n := 0
	for _, k := range r.FaultKills {
		n += k
	}
	return n
}

// Write prints the run's figures and the reconciliation's.
func (r *Result) Write(w io.Writer) {
	fmt.Fprintf(w, "commands:  %d submitIds + %d duplicate entries = %d entries on %s*\n",
		r.Commands, r.Duplicates, r.Entries, r.Streams)
	parts := make([]string, 0, len(Points))
	for _, p := range Points {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(p, "sms.gateway."), r.FaultKills[p]))
	}
	fmt.Fprintf(w, "kills:     %d at random moments, %d at fault points (%s; p=%.4g), %d armed lives that reached no point\n",
		r.Kills-r.FaultMisses, r.TotalFaultKills(), strings.Join(parts, ", "), r.FaultProbability, r.FaultMisses)
	fmt.Fprintf(w, "lives:     %d gateway processes (%d restarts under the same consumer, %d under a new one)\n",
		r.Lives, r.SameConsumer, r.NewConsumer)
	if r.Report != nil {
		r.Report.Write(w)
	}
	fmt.Fprintf(w, "wall time: %s\n", r.Elapsed.Round(time.Millisecond))
}

// names are a run's streams and group.
type names struct {
	prefix, commands, results, reports, group string
}

func newNames(tag string) names {
	p := "smscrash:" + tag + ":"
	return names{prefix: p, commands: p + "submit", results: p + "result", reports: p + "report", group: p + "gateway"}
}

// life is one gateway process of the plan: point is the fault point it is
// armed at; "" for a life killed once it has written share of the results
// its backlog calls for.
type life struct {
	point string
	share float64
}

// Run carries out one harness run: it starts the supplier simulator as a
// child, pushes the entries in one share per life, runs one gateway child
// per planned life (killed at a random moment, or armed at a fault point),
// then a last unarmed child until every entry is acked and every row
// settled, stops it and the supplier with SIGTERM, and reconciles. It
// returns an error when the run could not be carried out or when the
// reconciliation found a problem (then with the Result). ctx governs the
// whole run; its end kills the children.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x5ca5ca))

	d, err := relaypgx.Open(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("smscrash: postgres %s: %w", dsn.Redact(o.PostgresURL), dsn.Scrub(err, o.PostgresURL))
	}
	defer d.Close()
	if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, gateway.MigrationLine()); err != nil {
		return nil, err
	}
	db := d.Pool()
	var used int64
	if err := db.QueryRow(ctx, stmts["CountRows"]).Scan(&used); err != nil {
		return nil, fmt.Errorf("smscrash: count gateway_submit rows: %w", err)
	}
	if used > 0 {
		return nil, fmt.Errorf("smscrash: the schema already holds %d gateway_submit rows (an earlier run?): every run "+
			"numbers its submitIds from 1 and needs a fresh schema", used)
	}

	rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr, DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("smscrash: redis %s: %w", o.RedisAddr, err)
	}
	tag := fmt.Sprintf("%016x", rand.Uint64()) // not from Seed: reruns must not meet
	n := newNames(tag)
	defer rdb.Del(context.WithoutCancel(ctx), n.commands, n.results, n.reports) // the group goes with its stream

	secret := fmt.Sprintf("crash-%016x", rand.Uint64())
	secretFile := filepath.Join(o.Dir, "channel-"+tag+".secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("smscrash: %w", err)
	}
	record := filepath.Join(o.Dir, "supplier-"+tag+".record.jsonl")
	sup, err := startSupplier(ctx, o.Binary, secret, record, r.Uint64())
	if err != nil {
		return nil, err
	}
	defer sup.kill()

	entries := plan(o.Commands, o.Duplicates, r)
	lives := planLives(o.Kills, o.FaultLives, r)
	share := (len(entries) + len(lives)) / (len(lives) + 1)
	prob := o.FaultProbability
	if prob == 0 {
		prob = FaultProbabilityDefault
	}
	res := &Result{Streams: n.prefix, Commands: o.Commands, Duplicates: o.Duplicates, Entries: len(entries),
		FaultKills: map[string]int{}, FaultProbability: prob}
	fmt.Fprintf(o.Out, "sms gateway crash harness: %d entries (%d submitIds, %d duplicates) on %s*, supplier on %s, "+
		"%d lives killed at random moments, %d armed at each of %d fault points (p=%.4g)\n",
		len(entries), o.Commands, o.Duplicates, n.prefix, sup.addr, o.Kills, o.FaultLives, len(Points), prob)

	pushed := 0
	push := func(k int) error {
		end := min(pushed+k, len(entries))
		if err := pushEntries(ctx, rdb, n.commands, entries[pushed:end]); err != nil {
			return err
		}
		pushed = end
		return nil
	}
	consumerNo := 0
	nextConsumer := func() string {
		if consumerNo == 0 || r.IntN(2) == 0 {
			consumerNo++
			if consumerNo > 1 {
				res.NewConsumer++
			}
		} else {
			res.SameConsumer++
		}
		return "gw-" + strconv.Itoa(consumerNo)
	}
	channel := fmt.Sprintf("%s=%s,3.0,%s,%s,4,16", channelName, sup.addr, spID, secretFile)
	args := func(consumer string) []string {
		return []string{"sms", "gateway", "--channel", channel, "--redis", o.RedisAddr, "--postgres", o.PostgresURL,
			"--migrate", "--consumer", consumer, "--group", n.group, "--command-stream", n.commands,
			"--result-stream", n.results, "--report-stream", n.reports,
			"--submit-timeout", submitTimeout.String(), "--stale-claim", staleClaim.String(),
			"--min-idle", minIdle.String(), "--claim-interval", claimInterval.String(), "--log-level", "error"}
	}
	progress := func() string { return progressLine(ctx, db, rdb, n) }

	for i, l := range lives {
		if err := push(share); err != nil {
			return nil, err
		}
		consumer := nextConsumer()
		res.Lives++
		faults := ""
		if l.point != "" {
			faults = fmt.Sprintf("%s=%g", l.point, prob)
		}
		before, err := rdb.XLen(ctx, n.results).Result()
		if err != nil {
			return nil, fmt.Errorf("smscrash: XLEN %s: %w", n.results, err)
		}
		// The backlog is counted low (re-emitted copies count as done), so
		// the target is always reachable.
		target := int64(-1) // armed: never, the fault point ends it
		if l.point == "" {
			target = before + max(1, int64(l.share*float64(int64(pushed)-before)))
		}
		c, err := startChild(o.Binary, args(consumer), nil, faults, r.Uint64())
		if err != nil {
			return nil, err
		}
		lived, err := c.runUntil(ctx, lifeMax, progressPoll, func() bool {
			k, err := rdb.XLen(ctx, n.results).Result()
			return err == nil && target >= 0 && k >= target
		})
		if err != nil {
			return nil, fmt.Errorf("smscrash: life %d (consumer %s): %w", i+1, consumer, err)
		}
		how := fmt.Sprintf("SIGKILL at %.0f%% of its backlog", 100*l.share)
		switch point := c.faultPoint(); {
		case point != "":
			res.FaultKills[point]++
			how = "fault point " + point
		case l.point != "":
			res.Kills++
			res.FaultMisses++
			how = "SIGKILL, armed at " + l.point + " but never reached it"
		default:
			res.Kills++
		}
		fmt.Fprintf(o.Out, "  life %2d/%d %-5s after %-7s %-48s pushed=%d %s\n", i+1, len(lives)+1, consumer,
			lived.Round(time.Millisecond), how, pushed, progress())
	}
	if err := push(len(entries)); err != nil {
		return nil, err
	}

	consumer := nextConsumer()
	res.Lives++
	fmt.Fprintf(o.Out, "  life %2d/%d %-5s unarmed, drains the rest: %s\n", len(lives)+1, len(lives)+1, consumer, progress())
	drainBegan := time.Now()
	err = crash.Drain(ctx, o.Binary, args(consumer), func() (bool, error) { return drained(ctx, db, rdb, n, o.Commands) }, progress)
	if err != nil {
		return nil, fmt.Errorf("smscrash: last life: %w", err)
	}
	fmt.Fprintf(o.Out, "  drained in %s, stopped cleanly: %s\n", time.Since(drainBegan).Round(time.Millisecond), progress())
	if err := sup.stop(); err != nil {
		return nil, err
	}

	rep, err := Reconcile(ctx, Check{DB: db, Redis: rdb, CommandStream: n.commands, ResultStream: n.results,
		Group: n.group, Record: record, Commands: o.Commands, Entries: len(entries)})
	res.Report = rep
	res.Elapsed = time.Since(began)
	if err != nil {
		return res, err
	}
	if !rep.OK() {
		return res, fmt.Errorf("smscrash: reconciliation found %d problems: %s", len(rep.Problems), rep.problemList(10))
	}
	return res, nil
}

// plan returns the entries to push, as submitIds in push order: 1 to
// commands, and duplicates more entries repeating one of them, each either
// right behind its first copy or far behind it (a quarter to a half of the
// run later), so that the copies meet in one process, in two lives, or
// after the first is long settled.
func plan(commands, duplicates int, r *rand.Rand) []uint64 {
	type slot struct {
		at float64
		id uint64
	}
	slots := make([]slot, 0, commands+duplicates)
	for i := range commands {
		slots = append(slots, slot{float64(i), uint64(i + 1)})
	}
	for range duplicates {
		i := r.IntN(commands)
		at := float64(i) + 0.5
		if r.IntN(2) == 0 {
			at += float64(commands/4 + r.IntN(commands/4+1))
		}
		slots = append(slots, slot{at, uint64(i + 1)})
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.at, b.at) })
	out := make([]uint64, len(slots))
	for i, s := range slots {
		out[i] = s.id
	}
	return out
}

// planLives returns the killed lives in a random order: kills lives ended at
// a random moment, and faultLives armed at each fault point.
func planLives(kills, faultLives int, r *rand.Rand) []life {
	var lives []life
	for range kills {
		lives = append(lives, life{share: killMinShare + r.Float64()*(killMaxShare-killMinShare)})
	}
	for _, p := range Points {
		for range faultLives {
			lives = append(lives, life{point: p})
		}
	}
	r.Shuffle(len(lives), func(i, j int) { lives[i], lives[j] = lives[j], lives[i] })
	return lives
}

// pushEntries XADDs one command per submitId, pipelined.
func pushEntries(ctx context.Context, rdb redis.UniversalClient, stream string, ids []uint64) error {
	const batch = 500
	for len(ids) > 0 {
		k := min(batch, len(ids))
		pipe := rdb.Pipeline()
		for _, id := range ids[:k] {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: command(id).Values()})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("smscrash: push commands: %w", err)
		}
		ids = ids[k:]
	}
	return nil
}

// command is submitId id's command: one segment to one number. Every copy
// of one submitId is the same command.
func command(id uint64) gateway.Command {
	return gateway.Command{SubmitID: id, Channel: channelName, SrcID: "10690001", ServiceID: "CRASH",
		Dests: []string{fmt.Sprintf("139%08d", id%100_000_000)}, MsgFmt: cmpp.FmtASCII,
		Content: []byte("crash harness " + strconv.FormatUint(id, 10)), PkTotal: 1, PkNumber: 1}
}

// drained reports whether the run is over: every submitId has a settled
// row, and every entry of the command stream was delivered to the group
// and acked.
func drained(ctx context.Context, db *pgxpool.Pool, rdb redis.UniversalClient, n names, commands int) (bool, error) {
	settled, err := settledRows(ctx, db)
	if err != nil || settled < commands {
		return false, err
	}
	q, err := queueState(ctx, rdb, n.commands, n.group)
	if err != nil {
		return false, err
	}
	return q.pending == 0 && q.undelivered == 0, nil
}

// settledRows counts the rows in ACCEPTED, REJECTED or UNKNOWN.
func settledRows(ctx context.Context, db *pgxpool.Pool) (int, error) {
	counts, err := stateCounts(ctx, db)
	if err != nil {
		return 0, err
	}
	return counts[gateway.StateAccepted] + counts[gateway.StateRejected] + counts[gateway.StateUnknown], nil
}

func stateCounts(ctx context.Context, db *pgxpool.Pool) (map[gateway.State]int, error) {
	rows, err := db.Query(ctx, stmts["StateCounts"])
	if err != nil {
		return nil, fmt.Errorf("smscrash: count states: %w", err)
	}
	defer rows.Close()
	out := map[gateway.State]int{}
	for rows.Next() {
		var state string
		var k int
		if err := rows.Scan(&state, &k); err != nil {
			return nil, fmt.Errorf("smscrash: count states: %w", err)
		}
		out[gateway.State(state)] = k
	}
	return out, rows.Err()
}

// progressLine describes the run's state in one line.
func progressLine(ctx context.Context, db *pgxpool.Pool, rdb redis.UniversalClient, n names) string {
	counts, err := stateCounts(ctx, db)
	if err != nil {
		return err.Error()
	}
	q, err := queueState(ctx, rdb, n.commands, n.group)
	if err != nil {
		return err.Error()
	}
	results, err := rdb.XLen(ctx, n.results).Result()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("rows: claimed=%d accepted=%d rejected=%d unknown=%d not_sent=%d; results=%d pending=%d undelivered=%d",
		counts[gateway.StateClaimed], counts[gateway.StateAccepted], counts[gateway.StateRejected],
		counts[gateway.StateUnknown], counts[gateway.StateNotSent], results, q.pending, q.undelivered)
}
