package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// pgbench baseline: `pgbench -n -c 2 -j 2 -T <seconds>` of a one-row insert
// transaction into a table of a fresh schema, on the same server. Its tps is
// what this PostgreSQL commits with two clients, one row per commit: a
// ceiling for designs that commit once per message, a yardstick for those
// that do not.

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench returns pgbench's tps, or errPgbenchMissing when pgbench is not
// installed.
func runPgbench(ctx context.Context, base string, seconds int) (_ float64, err error) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return 0, errPgbenchMissing
	}
	_, schema, drop, err := freshSchema(ctx, base, 2)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	if err := execSQL(ctx, base, "CREATE TABLE "+schema+".pgb (id bigserial PRIMARY KEY, v int NOT NULL)"); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "peers-pgbench")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO "+schema+".pgb (v) VALUES (1);\n"), 0o600); err != nil {
		return 0, err
	}
	out, err := exec.CommandContext(ctx, bin, "-n", "-c", "2", "-j", "2", "-T", strconv.Itoa(seconds), "-f", script, base).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench: no tps in output:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

var errPgbenchMissing = errors.New("pgbench not installed")
