package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/console"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// consoleFlags are the flags of the management API and web console's
// listener.
type consoleFlags struct {
	addr, users, hosts, tlsCert, tlsKey string
}

// addConsoleFlags registers --console-addr, --console-users,
// --console-hosts, --console-tls-cert and --console-tls-key.
func addConsoleFlags(fs *flag.FlagSet) *consoleFlags {
	f := &consoleFlags{}
	fs.StringVar(&f.addr, "console-addr", "", "serve the management API (/api/v1/…) and the web console (/console/) on "+
		"this address (empty: off); :PORT means 127.0.0.1:PORT; needs --console-users and the shore database (--target)")
	fs.StringVar(&f.users, "console-users", "", "the console's users file: one \"TOKEN ACTOR ROLE\" a line (role viewer, "+
		"operator or admin; tokens of 16 to 1024 visible ASCII characters, e.g. openssl rand -hex 32; mode 0600)")
	fs.StringVar(&f.hosts, "console-hosts", "", "comma-separated host names browsers may use for --console-addr (Host "+
		"header) besides IP addresses and localhost")
	fs.StringVar(&f.tlsCert, "console-tls-cert", "", "serve --console-addr over HTTPS with this PEM certificate (with "+
		"--console-tls-key)")
	fs.StringVar(&f.tlsKey, "console-tls-key", "", "PEM private key of --console-tls-cert")
	return f
}

// readUsers reads a console users file, warning on log when other users
// may read it.
func readUsers(path string, log *slog.Logger) (console.Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--console-users: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("the console users file is readable by other users; chmod 600 it", "path", path,
			"mode", st.Mode().Perm().String())
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("--console-users: %w", err)
	}
	us, err := console.ParseUsers(data)
	if err != nil {
		return nil, fmt.Errorf("--console-users %s: %w", path, err)
	}
	return us, nil
}

// check checks the flags before anything is opened and reads the users
// file.
func (f *consoleFlags) check(target string, log *slog.Logger) (console.Users, error) {
	if f.users == "" {
		return nil, errors.New("--console-addr needs --console-users (the API's tokens, actors and roles)")
	}
	if target == "" {
		return nil, errors.New("--console-addr needs the shore database (--target): a conflict's evidence and a manual " +
			"decision read the shore's row")
	}
	return readUsers(f.users, log)
}

// consoleServer is a running console listener.
type consoleServer struct {
	url  string
	stop func()
}

// start serves the console of the shore on pool and target (the shore
// database's DSN) when --console-addr is set (nil otherwise). users, when
// set, replaces --console-users (the demo's generated token).
func (f *consoleFlags) start(pool *pgxpool.Pool, target, shoreNode string, users console.Users,
	log *slog.Logger) (*consoleServer, error) {
	if f.addr == "" {
		if f.users != "" || f.tlsCert != "" {
			return nil, errors.New("--console-users and --console-tls-cert need --console-addr")
		}
		return nil, nil
	}
	if users == nil {
		var err error
		if users, err = f.check(target, log); err != nil {
			return nil, err
		}
	}
	tlsCfg, err := serverTLS("--console", f.tlsCert, f.tlsKey, "")
	if err != nil {
		return nil, err
	}
	t, err := apply.OpenTarget(target)
	if err != nil {
		return nil, fmt.Errorf("--target %s: %w", dsn.Redact(target), dsn.Scrub(err, target))
	}
	c, err := console.New(console.Config{Pool: pool, Target: t, ShoreNode: shoreNode, Users: users,
		Clock: relayclock.System{}, Logger: log})
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "--console-addr", Addr: f.addr, Handler: c.Handler(),
		HandlerAuthenticates: true, Hosts: splitList(f.hosts), TLS: tlsCfg, Logger: log})
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error("shipsync console: serving stopped", "error", err)
		}
	}()
	return &consoleServer{url: srv.URL(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = t.Close()
	}}, nil
}

// runShipsyncConsole runs `relay shipsync console`: the management API and
// web console alone, beside the shore processes, on the same PostgreSQL
// and shore database.
func runShipsyncConsole(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync console", "shipsync console --console-addr :8443 --console-users FILE "+
		"--postgres URL --target DSN")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	target := fs.String("target", envOr("SHIPSYNC_TARGET_DSN", ""), "the shore database (MariaDB DSN; default $SHIPSYNC_TARGET_DSN)")
	nodeID := fs.String("node-id", arbiter.ShoreNodeDefault, "the shore's node id")
	logLevel := fs.String("log-level", "info", "debug, info, warn, error or off")
	cf := addConsoleFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync console: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if cf.addr == "" {
		return errors.New("shipsync console: --console-addr is required")
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	users, err := cf.check(*target, log)
	if err != nil {
		return err
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	if err := migrateOrCheck(ctx, d, relayclock.System{}, false, "shipsync console", shore.MigrationLines(d)...); err != nil {
		return err
	}
	srv, err := cf.start(d.Pool(), *target, *nodeID, users, log)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(env.Stdout, "shipsync console: %s/console/ (API %s/api/v1/)\n", srv.url, srv.url)
	<-ctx.Done()
	return nil
}
