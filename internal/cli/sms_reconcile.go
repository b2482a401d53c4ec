package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relaytype"
)

// fileFlags collects a repeatable file flag.
type fileFlags []string

func (f *fileFlags) String() string { return strings.Join(*f, ",") }

func (f *fileFlags) Set(v string) error {
	if v == "" {
		return errors.New("empty path")
	}
	*f = append(*f, v)
	return nil
}

// runSmsReconcile checks a drained send chain (internal/app/sms/reconcile)
// and prints the report; a failed check is an error (exit 1).
func runSmsReconcile(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms reconcile", "sms reconcile --postgres URL [--redis ADDR] [--supplier-record FILE]... [--in-flight] [--strict]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL holding the send chain's tables (read only; env DATABASE_URL)")
	redisAddr := fs.String("redis", "", "Redis server of the chain's streams; empty: the streams are not checked")
	streams := fs.String("streams", strings.Join(reconcile.StreamsDefault, ","),
		"comma-separated streams whose consumer groups must have nothing pending and no lag")
	var records fileFlags
	fs.Var(&records, "supplier-record", "a supplier simulator's record file (repeatable, one per simulator); none: supplier-side counts are not checked")
	inFlight := fs.Bool("in-flight", false, "report work still under way (messages not completed, pending rows and entries) as in flight instead of failing")
	strict := fs.Bool("strict", false, "also fail on status reports parked and never matched to a submit")
	maxConns := fs.Int("max-connections", reconcile.MaxConnectionsDefault, "connections the database may have open at once")
	idle := fs.Duration("idle-in-transaction", reconcile.IdleInTransactionDefault, "a session idle inside a transaction longer than this is a problem")
	appName := fs.String("application-name", "", "count only sessions with this application_name in the health check; empty: every session of the database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms reconcile: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *maxConns < 1 || *idle <= 0 {
		return errors.New("sms reconcile: --max-connections and --idle-in-transaction must be positive")
	}
	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer pool.Close()
	opts := reconcile.Options{InFlight: *inFlight, Strict: *strict, SupplierRecords: records,
		MaxConnections: *maxConns, IdleInTransaction: *idle, ApplicationName: *appName}
	for _, s := range strings.Split(*streams, ",") {
		if s = strings.TrimSpace(s); s != "" {
			opts.Streams = append(opts.Streams, s)
		}
	}
	if *redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DisableIdentity: true})
		defer rdb.Close()
		opts.Redis = rdb
	}
	rep, err := reconcile.Run(ctx, pool, opts)
	if err != nil {
		return dsn.Scrub(err, *pgURL)
	}
	if err := rep.Write(env.Stdout); err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("sms reconcile: failed checks: %s", strings.Join(rep.Failed(), ", "))
	}
	return nil
}
