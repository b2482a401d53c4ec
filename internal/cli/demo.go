package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/internal/demo"
)

func runDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "demo", "demo [--n N] [--store URL] [--keys K] [--holes PERMILLE] [--seed S]")
	n := fs.Int("n", 10000, "ids to generate in the source table (rows plus holes)")
	store := fs.String("store", "", "store: empty for a fresh SQLite file in a temp dir, or postgres://…")
	keys := fs.Int("keys", 50, "distinct projection keys")
	holes := fs.Int("holes", 2, "permille of ids left as holes (half fill late, half never)")
	seed := fs.Uint64("seed", 1, "generator seed (same seed, same source)")
	delay := fs.Duration("max-commit-delay", 500*time.Millisecond, "how long a hole may wait for a late commit before it is released as permanent")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up (and fail) after this long")
	kafka := fs.Bool("kafka", true, "add the outbox stage: change events through the outbox to an in-process Kafka (kfake), read back and reconciled")
	logLevel := fs.String("log-level", "off", "engine log level on stderr (off, debug, info, warn, error)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-demo-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url := *store
	if url == "" {
		url = filepath.Join(dir, "relay.db")
	}
	d, err := openStore(ctx, url)
	if err != nil {
		return err
	}
	defer d.Close()

	_, err = demo.Run(ctx, demo.Options{
		Store:          d,
		Pipeline:       "demo-" + randomSuffix(),
		Dir:            dir,
		Plan:           demo.PlanOptions{N: *n, Keys: *keys, Seed: *seed, Holes: *holes},
		MaxCommitDelay: *delay,
		Timeout:        *timeout,
		Logger:         log,
		Kafka:          *kafka,
	}, env.Stdout)
	return err
}

// randomSuffix returns 8 hex characters, so demo runs on a shared store never
// collide.
func randomSuffix() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%d", os.Getpid())
	}
	return hex.EncodeToString(b[:])
}
