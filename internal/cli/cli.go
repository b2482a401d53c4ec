// Package cli is relay's command tree: the only place that reads flags,
// environment variables and files. cmd/relay calls Run.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/relayhq/relay/internal/dsn"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// Env is what a command writes to.
type Env struct {
	Stdout, Stderr io.Writer
}

// Logger returns a text logger on stderr at level (debug, info, warn, error),
// or a logger that discards everything for "off".
func (e *Env) Logger(level string) (*slog.Logger, error) {
	if level == "off" {
		return slog.New(slog.DiscardHandler), nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func commands() map[string]command {
	return map[string]command{
		"demo":     {"run a whole pipeline on the embedded store and reconcile it (no setup needed)", runDemo},
		"migrate":  {"apply the engine's migrations to a store", runMigrate},
		"bench":    {"measure throughput: relay bench fifo", runBench},
		"serve":    {"run the demo pipeline as a long-lived service over a foreign table (single active instance)", runServe},
		"admin":    {"operate a queue: stats, dead, dlq, holes, replay, reopen (relay admin -h)", runAdmin},
		"msgx":     {"airport SIS/AODB message exchange: run, migrate, params, simulate, verify, request (relay msgx)", runMsgx},
		"sms":      {"SMS send chain over CMPP: supplier (a simulated carrier gateway) (relay sms)", runSms},
		"shipsync": {"ship–shore data sync: pki, node registry, the shore server (relay shipsync)", runShipsync},
	}
}

// Run executes the command line args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	env := &Env{Stdout: stdout, Stderr: stderr}
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, cmds)
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage(stderr, cmds)
		return fmt.Errorf("unknown command %q", args[0])
	}
	if err := checkEnvFiles(); err != nil {
		return err
	}
	err := cmd.run(ctx, env, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "relay — reliable message pipelines\n\nusage: relay <command> [flags]\n\ncommands:")
	listCommands(w, cmds)
	fmt.Fprintln(w, "\nrun `relay <command> -h` for a command's flags")
}

// listCommands writes one line per command (or role of a command group),
// sorted by name.
func listCommands(w io.Writer, cmds map[string]command) {
	width := 8
	for n := range cmds {
		width = max(width, len(n))
	}
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-*s %s\n", width, n, cmds[n].summary)
	}
}

// newFlags returns a flag set that prints its usage to env.Stderr.
func newFlags(env *Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: relay %s\n\n", synopsis)
		// A default taken from the environment may be a connection string
		// with a password (envOr): shown with the password masked.
		fs.VisitAll(func(f *flag.Flag) {
			if strings.Contains(f.DefValue, "@") {
				f.DefValue = dsn.Redact(f.DefValue)
			}
		})
		fs.PrintDefaults()
	}
	return fs
}

// envOr returns the environment variable name, or def when unset. When
// name (one of secretEnv) is unset and name_FILE is set, the value is the
// content of that file
// (surrounding space trimmed): how a container receives a secret such as a
// DSN with a password (compose secrets, Kubernetes secret volumes) without
// putting it in its environment. Run refuses to start when such a file
// cannot be read (checkEnvFiles), so a failed read here falls back to def
// only if the file vanished in between.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
		return v
	}
	if v, err := envFile(name); err == nil && v != "" {
		return v
	}
	return def
}

// secretEnv are the variables that may come from a file (name_FILE): the
// connection strings, which carry passwords.
var secretEnv = []string{"DATABASE_URL", "SHIPSYNC_TARGET_DSN", "SHIPSYNC_SHIP_DB", "CAPTURE_DB"}

// envFile reads the file name_FILE points to ("" when it is unset or name is
// not one of secretEnv).
func envFile(name string) (string, error) {
	path := os.Getenv(name + "_FILE")
	if path == "" || !slices.Contains(secretEnv, name) {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("$%s_FILE: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// checkEnvFiles reads the name_FILE of every secretEnv name that is unset,
// so that an unreadable secret file stops the command with an error naming
// the variable instead of leaving a flag at its default.
func checkEnvFiles() error {
	for _, name := range secretEnv {
		if strings.TrimSpace(os.Getenv(name)) != "" {
			continue
		}
		if _, err := envFile(name); err != nil {
			return err
		}
	}
	return nil
}
