package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestQuick runs the CI configuration (--quick) against the local PostgreSQL
// (or TEST_DATABASE_URL) and checks that every run verified: correctness only,
// no figure is judged.
func TestQuick(t *testing.T) {
	args := []string{"--quick"}
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		args = append(args, "--postgres", u)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run --quick: %v", err)
	}
	if strings.Contains(out.String(), "FAIL") {
		t.Fatal("run --quick printed FAIL")
	}
	if !strings.Contains(out.String(), "all runs verified") {
		t.Fatal("run --quick did not reach the summary")
	}
	for _, sc := range []string{"outbox relay to Redis Streams", "outbox relay to Kafka"} {
		if !strings.Contains(out.String(), sc) {
			t.Fatalf("run --quick did not run %q", sc)
		}
	}
}

// TestStreamCheckCatchesFaults: the outbox read-back reports a lost event, a
// duplicate and a key's events out of order (and accepts a redelivered older
// event as a duplicate, not a reordering).
func TestStreamCheckCatchesFaults(t *testing.T) {
	s := outboxSpec{n: 6, keys: 2, perTx: 3} // key 0: 0, 2, 4; key 1: 1, 3, 5
	read := func(js ...int) (outboxResult, error) {
		c := newStreamCheck(s)
		for _, j := range js {
			if err := c.observe([]byte(strconv.Itoa(j))); err != nil {
				return outboxResult{}, err
			}
		}
		return c.result(outboxResult{})
	}
	if r, err := read(0, 1, 2, 3, 4, 5); err != nil || r.Duplicates != 0 || !r.orderHeld() {
		t.Fatalf("clean stream: %+v, %v", r, err)
	}
	if _, err := read(0, 1, 2, 3, 5); err == nil {
		t.Fatal("a lost event passed")
	}
	if r, err := read(0, 1, 2, 0, 2, 3, 4, 5); err != nil || r.Duplicates != 2 || !r.orderHeld() {
		t.Fatalf("redelivery: %+v, %v", r, err)
	}
	if r, err := read(0, 1, 4, 3, 2, 5); err != nil || r.orderHeld() || r.Reordered != 1 {
		t.Fatalf("key 0 out of order: %+v, %v", r, err)
	}
	if _, err := read(0, 1, 2, 3, 4, 5, 6); err == nil {
		t.Fatal("a foreign record passed")
	}
}

func TestParseFlagsAndMedian(t *testing.T) {
	// The pure parts: median and the flag parser.
	if m := median([]float64{1, 2, 10}); m != 2 {
		t.Fatalf("median = %v", m)
	}
	for _, bad := range [][]string{
		{"--relay-settings", "4x100"},
		{"--scenarios", "outbox-relay"},
		{"--outbox-brokers", "nats"},
		{"--outbox-keys", "2000", "--outbox-n", "1000"},
		{"--keys", "200", "--perkey-n", "100"},
		{"--perkey-settings", "4x0x1"},
		{"--rates", "0"},
	} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	o, err := parseFlags([]string{"--quick"}, &bytes.Buffer{})
	if err != nil || o.n != 3000 || o.rounds != 1 || o.warmN != 1000 || o.pgbenchSeconds != 0 {
		t.Fatalf("--quick = %+v, %v", o, err)
	}
}

// TestVerificationCatchesFaults: the checks every run ends with report a lost
// job, a duplicated job and a job applied out of order — a harness whose
// checks cannot fail would print "ok" for anything.
func TestVerificationCatchesFaults(t *testing.T) {
	base := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		base = u
	}
	ctx := context.Background()
	dsn, _, drop, err := freshSchema(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop() })
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec := func(sql string, args ...any) int64 {
		t.Helper()
		tag, err := pool.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return tag.RowsAffected()
	}
	exec(effectDDL)
	exec(keyDDL)
	exec(keyFill, 2)

	// Keys 0 and 1: seq 1, 3 are key 0; seq 2, 4 are key 1.
	for _, seq := range []int64{1, 2, 3} {
		if n := exec(orderedStep, seq, keyOf(seq, 2), prevOf(seq, 2)); n != 1 {
			t.Fatalf("seq %d in order: %d rows", seq, n)
		}
	}
	if err := checkEffects(ctx, pool, 4); err == nil {
		t.Fatal("a lost job (seq 4) passed checkEffects")
	}
	if err := checkKeys(ctx, pool, 4, 2); err == nil {
		t.Fatal("key 1 stopped short of seq 4 but passed checkKeys")
	}
	if n := exec(orderedStep, int64(3), keyOf(3, 2), prevOf(3, 2)); n != 0 {
		t.Fatal("seq 3 applied twice in a row was accepted as in order")
	}
	exec(orderedStep, int64(4), keyOf(4, 2), prevOf(4, 2))
	if err := checkEffects(ctx, pool, 4); err != nil {
		t.Fatalf("every job once: %v", err)
	}
	if err := checkKeys(ctx, pool, 4, 2); err != nil {
		t.Fatalf("every key in order: %v", err)
	}
	exec(effectInsert, int64(2)) // a second execution of seq 2
	if err := checkEffects(ctx, pool, 4); err == nil {
		t.Fatal("a duplicated job passed checkEffects")
	}
}
