package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

const (
	spID, secret = "901234", "gw-test-secret"
	channelName  = "cm"
)

var start = time.Date(2026, 9, 20, 2, 0, 0, 0, time.UTC)

// bundle is one test's world: a Redis client and stream names of its own, a
// fresh PostgreSQL schema with the gateway line, a supplier on loopback
// writing a record, and a gateway configuration pointing at them.
type bundle struct {
	ctx    context.Context
	srv    *supplier.Server
	rdb    *redis.Client
	pool   *pgxpool.Pool
	clock  *relayclock.Fake
	record string
	cfg    gateway.Config
}

func redisAddr() string { return "127.0.0.1:6379" }

func setup(t *testing.T) *bundle { t.Helper(); return setupWith(t, nil) }

// setupWith is setup with the supplier's configuration adjusted by mod.
func setupWith(t *testing.T, mod func(*supplier.Config)) *bundle {
	t.Helper()
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(), DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(ctx).Err(), "Redis at %s must be running", redisAddr())
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "test:gw:" + hex.EncodeToString(b[:]) + ":"
	cmdStream, resStream, repStream := prefix+"submit", prefix+"result", prefix+"report"
	t.Cleanup(func() {
		_ = rdb.Del(context.Background(), cmdStream, resStream, repStream).Err()
	})

	dsn := testdb.PGSchema(t)
	d, err := relaypgx.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	clock := relayclock.NewFake(start)
	_, err = relaymigrate.Up(ctx, d, clock, gateway.MigrationLine())
	require.NoError(t, err)

	record := filepath.Join(t.TempDir(), "record.jsonl")
	scfg := supplier.Config{
		Accounts: []supplier.Account{{SourceAddr: spID, Secret: secret}},
		Record:   supplier.RecordConfig{Path: record},
		Clock:    clock,
		Seed:     7,
	}
	if mod != nil {
		mod(&scfg)
	}
	srv, err := supplier.New(scfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-done)
		cancel()
	})
	return &bundle{srv: srv, ctx: ctx, rdb: rdb, pool: d.Pool(), clock: clock, record: record, cfg: gateway.Config{
		Redis: rdb, DB: d.Pool(), Consumer: "gw-1",
		CommandStream: cmdStream, ResultStream: resStream, ReportStream: repStream,
		Channels: []gateway.ChannelConfig{{Name: channelName, Pool: cmppconn.PoolConfig{Size: 2, Conn: cmppconn.Config{
			Addr: ln.Addr().String(), Version: cmpp.V30, SourceAddr: spID, Secret: secret}}}},
		Clock: clock, Block: 50 * time.Millisecond,
	}}
}

// run starts a gateway of b.cfg; it is stopped (and awaited) at cleanup or
// by the returned func.
func (b *bundle) run(t *testing.T) (*gateway.Gateway, func()) {
	t.Helper()
	g, err := gateway.New(b.cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		require.NoError(t, <-done)
	})
	t.Cleanup(stop)
	return g, stop
}

func command(id uint64) gateway.Command {
	return gateway.Command{SubmitID: id, Channel: channelName, SrcID: "10690001", ServiceID: "TEST",
		Dests: []string{"13900000000"}, MsgFmt: cmpp.FmtASCII, Content: []byte("code " + strconv.FormatUint(id, 10)),
		PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1}
}

func (b *bundle) push(t *testing.T, values map[string]any) string {
	t.Helper()
	id, err := b.rdb.XAdd(b.ctx, &redis.XAddArgs{Stream: b.cfg.CommandStream, Values: values}).Result()
	require.NoError(t, err)
	return id
}

// results reads the whole result stream.
func (b *bundle) results(t *testing.T) []gateway.Result {
	t.Helper()
	msgs, err := b.rdb.XRange(b.ctx, b.cfg.ResultStream, "-", "+").Result()
	require.NoError(t, err)
	out := make([]gateway.Result, 0, len(msgs))
	for _, m := range msgs {
		r, err := gateway.ParseResult(m.Values)
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// waitResults waits until the result stream holds n entries and returns them.
func (b *bundle) waitResults(t *testing.T, n int) []gateway.Result {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := b.rdb.XLen(b.ctx, b.cfg.ResultStream).Result()
		return err == nil && l >= int64(n)
	}, 20*time.Second, 5*time.Millisecond)
	return b.results(t)
}

// pending is the number of unacked entries of the group.
func (b *bundle) pending(t *testing.T) int64 {
	t.Helper()
	p, err := b.rdb.XPending(b.ctx, b.cfg.CommandStream, gateway.GroupDefault).Result()
	require.NoError(t, err)
	return p.Count
}

func (b *bundle) counts(t *testing.T) supplier.Counts {
	t.Helper()
	rec, err := supplier.ReadRecord(b.record)
	require.NoError(t, err)
	return rec.Counts()
}
