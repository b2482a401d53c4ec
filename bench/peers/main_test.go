package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
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
}

func TestParseFlagsAndMedian(t *testing.T) {
	// The pure parts: median and the flag parser.
	if m := median([]float64{1, 2, 10}); m != 2 {
		t.Fatalf("median = %v", m)
	}
	if _, err := parseFlags([]string{"--relay-settings", "4"}, &bytes.Buffer{}); err == nil {
		t.Fatal("bad --relay-settings accepted")
	}
	o, err := parseFlags([]string{"--quick"}, &bytes.Buffer{})
	if err != nil || o.n != 5000 || o.rounds != 1 || o.warmN != 5000 {
		t.Fatalf("--quick = %+v, %v", o, err)
	}
}
