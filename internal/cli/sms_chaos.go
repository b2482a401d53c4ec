package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/chaincrash"
	"github.com/relayhq/relay/relaytype"
)

// runSmsChaos runs the send chain's crash harness
// (internal/app/sms/chaincrash) with this binary as every role's process,
// in a fresh PostgreSQL schema (dropped afterwards) and fresh streams, and
// prints its progress, its figures and the reconciliation. Any problem
// found is an error (exit 1).
func runSmsChaos(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms chaos", "sms chaos [-n N] [--tps R] [--kills K] [--drops D] [--restart-redis] [--seed S] [--postgres URL] [--redis ADDR]")
	n := fs.Int("n", chaincrash.MessagesDefault, "requests sent through the API")
	tps := fs.Float64("tps", chaincrash.TPSDefault, "rate the requests are offered at, per second")
	longShare := fs.Float64("long-share", chaincrash.LongShareDefault, "share of three-segment messages")
	kills := fs.Int("kills", chaincrash.KillsDefault, "SIGKILLs at random moments while the requests go out, to api, worker, publisher, gateway and callback in turn")
	faultProb := fs.Float64("fault-probability", chaincrash.FaultProbabilityDefault, "chance that passing a fault point kills an armed life (every other restart of a role is armed at all its points)")
	drops := fs.Int("drops", chaincrash.DropsDefault, "times a supplier, picked at random, drops every connection")
	restartRedis := fs.Bool("restart-redis", false, "restart the Redis server once mid-run: redis-cli shutdown nosave, then redis-server with --redis-server-args (it keeps nothing: every other user of that Redis loses its data too)")
	redisServerArgs := fs.String("redis-server-args", "--daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
		"arguments of redis-server for --restart-redis (split on spaces; \"\" is an empty argument)")
	drainTimeout := fs.Duration("drain-timeout", chaincrash.DrainTimeoutDefault, "give up when the chain has not drained this long after the last answer")
	seed := fs.Uint64("seed", 1, "seed of the plan: kill moments, armed lives, drops, the suppliers' and the children's draws")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", chaincrash.RedisAddrDefault), "Redis server for the run's streams (named per run, deleted at the end)")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL server; the run creates a schema of its own there and drops it at the end")
	binary := fs.String("binary", "", "relay executable the roles run (default: this one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms chaos: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *n < 1 || *tps <= 0 || *kills < 0 || *drops < 0 || *longShare < 0 || *longShare > 1 || *faultProb < 0 || *faultProb > 1 {
		return errors.New("sms chaos: -n and --tps must be positive, --kills and --drops not negative, --long-share and --fault-probability in [0, 1]")
	}
	bin := *binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("sms chaos: find the relay binary: %w", err)
		}
		bin = exe
	}
	o := chaincrash.Options{Binary: bin, RedisAddr: *redisAddr, Messages: *n, TPS: *tps, LongShare: *longShare,
		Kills: *kills, FaultProbability: *faultProb, Drops: *drops, DrainTimeout: *drainTimeout, Seed: *seed, Out: env.Stdout}
	if *longShare == 0 {
		o.LongShare = -1
	}
	if *restartRedis {
		o.RedisRestarts = 1
		o.RestartRedis = func(ctx context.Context) error { return restartRedisServer(ctx, *redisAddr, *redisServerArgs) }
	}
	schema := "relay_sms_chaos_" + randomHex(6)
	schemaURL, drop, err := scratchSchema(ctx, *pgURL, schema)
	if err != nil {
		return err
	}
	defer drop()
	o.PostgresURL = schemaURL
	dir, err := os.MkdirTemp("", "relay-sms-chaos-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir = dir

	fmt.Fprintf(env.Stdout, "relay sms chaos: every role of the send chain as a child process on Redis %s and PostgreSQL "+
		"schema %s, a simulated supplier per channel; roles killed with SIGKILL in turn and at fault points, suppliers "+
		"dropping connections, then drained and reconciled\n", *redisAddr, schema)
	res, err := chaincrash.Run(ctx, o)
	if res != nil {
		res.Write(env.Stdout)
	}
	return err
}

// restartRedisServer stops the Redis server at addr without saving and
// starts redis-server with args again, then waits until it answers.
func restartRedisServer(ctx context.Context, addr, args string) error {
	host, port, _ := strings.Cut(addr, ":")
	if out, err := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "shutdown", "nosave").CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "connection") {
		return fmt.Errorf("redis-cli shutdown nosave: %w: %s", err, out)
	}
	var argv []string
	for _, a := range strings.Fields(args) {
		if a == `""` {
			a = ""
		}
		argv = append(argv, a)
	}
	if out, err := exec.CommandContext(ctx, "redis-server", argv...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-server: %w: %s", err, out)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rdb.Close()
	for range 100 {
		if rdb.Ping(ctx).Err() == nil {
			return nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("redis %s does not answer after its restart", addr)
}
