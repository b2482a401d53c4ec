package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// runSmsSeedData loads tenancy.DemoFixture into PostgreSQL, idempotently.
// Secrets never reach stdout: channel secrets and new apps' credentials are
// files of mode 0600 in --secrets-dir (mode 0700); only API keys (which are
// identifiers) and paths are printed.
func runSmsSeedData(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms seed-data", "sms seed-data --postgres URL [--migrate] [--secrets-dir DIR]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL to load the fixture into")
	migrate := fs.Bool("migrate", false, "apply the sms migration line first (otherwise an old schema is refused)")
	secretsDir := fs.String("secrets-dir", "relay-sms-secrets", "directory (created with mode 0700) holding each channel's CMPP secret "+
		"(channel-NAME.secret, generated when absent, never overwritten) and each new app's credentials (app-ENTERPRISE-APP.credentials)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms seed-data: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	dir, err := secretsDirectory(*secretsDir)
	if err != nil {
		return err
	}
	channelSecret := func(name string) string { return filepath.Join(dir, "channel-"+name+".secret") }
	var generated []string
	for _, name := range tenancy.DemoChannels {
		made, err := ensureSecretFile(channelSecret(name))
		if err != nil {
			return err
		}
		if made {
			generated = append(generated, name)
		}
	}

	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if *migrate {
		if _, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...); err != nil {
			return err
		}
	} else if err := relaymigrate.Check(ctx, d, tenancy.MigrationLines()...); err != nil {
		return fmt.Errorf("sms seed-data: %w (run with --migrate)", err)
	}

	fx := tenancy.DemoFixture(func(name string) string { return "file:" + channelSecret(name) })
	credFile := func(c tenancy.AppCredentials) string {
		return filepath.Join(dir, "app-"+c.Enterprise+"-"+c.App+".credentials")
	}
	res, err := tenancy.Seed(ctx, d.Pool(), fx, tenancy.SeedOpts{Clock: clock, NewApp: func(c tenancy.AppCredentials) error {
		return writeCredentials(credFile(c), c, clock.Now())
	}})
	if err != nil {
		return err
	}
	snap, err := tenancy.Load(ctx, d.Pool(), clock)
	if err != nil {
		return err
	}
	balances, err := tenancy.Balances(ctx, d.Pool())
	if err != nil {
		return err
	}
	printSeedSummary(env.Stdout, res, snap, balances, dir, generated, credFile)
	return nil
}

// secretsDirectory creates dir with mode 0700 when absent and refuses one
// that others can read or enter; it returns dir as an absolute path.
func secretsDirectory(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--secrets-dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("--secrets-dir: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--secrets-dir: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("--secrets-dir %s is not a directory", abs)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--secrets-dir %s has mode %04o: others may read it; chmod 700 it", abs, st.Mode().Perm())
	}
	return abs, nil
}

// ensureSecretFile creates path (mode 0600) holding a random secret when it
// does not exist, and reports whether it did; an existing file is kept.
func ensureSecretFile(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("channel secret: %w", err)
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		_ = f.Close()
		return false, err
	}
	_, err = f.WriteString(hex.EncodeToString(b) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("channel secret %s: %w", path, err)
	}
	return true, nil
}

// writeCredentials writes a new app's credentials to path with mode 0600,
// replacing a file a failed earlier run may have left (its app was rolled
// back, so that secret was never valid), and syncs it before the seed
// commits.
func writeCredentials(path string, c tenancy.AppCredentials, now time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil { // an older file may have had another mode
		_ = f.Close()
		return err
	}
	_, err = fmt.Fprintf(f, "# relay sms app %s/%s, created %s\napi_key=%s\nhmac_secret=%s\n",
		c.Enterprise, c.App, now.UTC().Format(time.RFC3339), c.APIKey, hex.EncodeToString(c.HMACSecret))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func printSeedSummary(w io.Writer, res tenancy.SeedResult, snap *rules.Snapshot, balances []tenancy.Balance, dir string, generated []string,
	credFile func(tenancy.AppCredentials) string) {
	fmt.Fprintf(w, "sms seed-data: %d rows created\n", res.TotalCreated())
	for _, t := range res.Tables() {
		fmt.Fprintf(w, "  %-28s created %4d  kept %4d\n", t, res.Created[t], res.Kept[t])
	}
	d := snap.Data()
	fmt.Fprintf(w, "\ncarriers: %d, number segments: %d, channels: %d, enterprises: %d, apps: %d, routes: %d\n",
		len(d.Carriers), len(d.Segments), len(d.Channels), len(d.Enterprises), len(d.Apps), len(d.Routes))
	fmt.Fprintln(w, "\nchannels (secrets in files; start a simulator for one with the command shown):")
	for _, c := range d.Channels {
		path := strings.TrimPrefix(c.SecretRef, "file:")
		note := ""
		for _, g := range generated {
			if g == c.Name {
				note = " (secret generated)"
			}
		}
		fmt.Fprintf(w, "  %-5s %-8s %-7s CMPP %s sp_id %s src_id %s on %s%s\n", c.Name, c.Carrier, c.Supplier,
			c.CMPPVersion, c.SPID, c.SrcID, c.Address, note)
		fmt.Fprintf(w, "        SMS_SUPPLIER_ACCOUNTS=%s:$(cat %s) relay sms supplier --listen %s --versions %s\n",
			c.SPID, path, c.Address, c.CMPPVersion)
	}
	fmt.Fprintln(w, "\napps:")
	newApps := map[string]tenancy.AppCredentials{}
	for _, c := range res.NewApps {
		newApps[c.APIKey] = c
	}
	for _, a := range d.Apps {
		ent := snap.Enterprise(a.EnterpriseID)
		line := fmt.Sprintf("  %s/%s api_key %s", ent.Name, a.Name, a.APIKey)
		if c, ok := newApps[a.APIKey]; ok {
			line += " — created; HMAC secret in " + credFile(c) + " (shown nowhere else)"
		} else {
			line += " — existed; its secret is unchanged"
		}
		fmt.Fprintln(w, line)
		var prices []string
		for _, c := range d.Carriers {
			if p, err := snap.UnitPrice(a.ID, c.Code); err == nil {
				prices = append(prices, fmt.Sprintf("%s %s", c.Code, p))
			}
		}
		fmt.Fprintf(w, "        price per segment: %s\n", strings.Join(prices, ", "))
	}
	fmt.Fprintln(w, "\naccounts:")
	for _, b := range balances {
		fmt.Fprintf(w, "  %-8s balance %s, frozen %s\n", b.Enterprise, b.Balance, b.Frozen)
	}
	fmt.Fprintf(w, "\nsecrets directory: %s\n", dir)
}
