package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/relaytype"
)

// Fixture is a whole tenancy to load: the platform's carriers, channels,
// groups and blacklist, and each enterprise with its account, signatures,
// templates, blacklist and apps. Rows refer to each other by name.
type Fixture struct {
	Carriers    []FixtureCarrier
	Channels    []FixtureChannel
	Groups      []FixtureGroup
	Blacklist   []string // platform-wide
	Enterprises []FixtureEnterprise
}

// FixtureCarrier is a carrier with its number segments.
type FixtureCarrier struct {
	Code, Name string
	Prefixes   []string
}

// FixtureChannel is a supplier account. SecretRef is "file:/path".
type FixtureChannel struct {
	Name, Supplier, Carrier, Address, Version, SPID, SecretRef, SrcID, ServiceID string
	Connections, Window, RateLimit                                               int
	ReceiptMode                                                                  string
}

// FixtureGroup is a channel group.
type FixtureGroup struct {
	Name    string
	Members []FixtureMember
}

// FixtureMember is a channel of a group.
type FixtureMember struct {
	Channel          string
	Priority, Weight int
}

// FixtureEnterprise is a tenant with its account's opening balance.
type FixtureEnterprise struct {
	Name, Title string
	Balance     rules.Money
	Signatures  []FixtureSignature
	Templates   []FixtureTemplate
	Blacklist   []string
	Apps        []FixtureApp
}

// FixtureSignature is a signature and its registration per channel.
type FixtureSignature struct {
	Text          string
	Registrations []FixtureRegistration
}

// FixtureRegistration is a signature's state on one channel.
type FixtureRegistration struct {
	Channel string
	State   rules.RegState
	ExtCode string
}

// FixtureTemplate is a template.
type FixtureTemplate struct {
	Code, Kind, Body string
	State            rules.TemplateState
}

// FixtureApp is an app with its prices (per carrier code), frequency limits
// and routes.
type FixtureApp struct {
	Name       string
	DailyLimit int // 0: none
	Prices     map[string]rules.Money
	Frequency  []FixtureFrequency
	Routes     []FixtureRoute
}

// FixtureFrequency is a per-number frequency limit.
type FixtureFrequency struct {
	Window time.Duration
	Max    int
}

// FixtureRoute routes an app's messages to Carrier signed Signature ("" for
// any) to Group.
type FixtureRoute struct {
	Carrier, Signature, Group string
	Priority                  int
}

// AppCredentials are a new app's API key and HMAC secret, handed to
// SeedOpts.NewApp once, when the app is created. String never shows the
// secret.
type AppCredentials struct {
	Enterprise, App string
	APIKey          string
	HMACSecret      []byte
}

// String shows the key and hides the secret.
func (c AppCredentials) String() string {
	return fmt.Sprintf("%s/%s api_key=%s hmac_secret=[redacted]", c.Enterprise, c.App, c.APIKey)
}

// SeedOpts are Seed's options.
type SeedOpts struct {
	// Clock stamps every row; required.
	Clock relaytype.Clock
	// Rand makes API keys and HMAC secrets; default crypto/rand.
	Rand io.Reader
	// NewApp, when set, is called for each app created, inside the seed's
	// transaction before it commits: an error rolls everything back, so a
	// created app's secret is never lost (write it somewhere safe here).
	NewApp func(AppCredentials) error
}

// SeedResult counts what Seed created and what it found already there, by
// table.
type SeedResult struct {
	Created map[string]int
	Kept    map[string]int
	// NewApps are the apps created (secrets included: hand them to NewApp's
	// writer, never to a log).
	NewApps []AppCredentials
}

// Tables returns the table names of r in order.
func (r SeedResult) Tables() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]int{r.Created, r.Kept} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TotalCreated is the number of rows Seed inserted.
func (r SeedResult) TotalCreated() int {
	n := 0
	for _, v := range r.Created {
		n += v
	}
	return n
}

// seeder holds one Seed run.
type seeder struct {
	ctx  context.Context
	tx   pgx.Tx
	now  time.Time
	res  *SeedResult
	opts SeedOpts
}

func (s *seeder) count(table string, created bool) {
	if created {
		s.res.Created[table]++
	} else {
		s.res.Kept[table]++
	}
}

// row runs a Seed* statement returning (id, created).
func (s *seeder) row(table, stmt string, args ...any) (int64, error) {
	var id int64
	var created bool
	err := s.tx.QueryRow(s.ctx, stmts[stmt], args...).Scan(&id, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("tenancy: seed %s: row inserted by a concurrent transaction; run again", table)
	}
	if err != nil {
		return 0, fmt.Errorf("tenancy: seed %s: %w", table, err)
	}
	s.count(table, created)
	return id, nil
}

// flag runs a Seed* statement returning whether it inserted.
func (s *seeder) flag(table, stmt string, args ...any) error {
	var created bool
	if err := s.tx.QueryRow(s.ctx, stmts[stmt], args...).Scan(&created); err != nil {
		return fmt.Errorf("tenancy: seed %s: %w", table, err)
	}
	s.count(table, created)
	return nil
}

// Seed loads f into db in one transaction, inserting what is absent by its
// natural key (a carrier's code, a channel's name, an enterprise's name, an
// app's name within its enterprise, …) and leaving every existing row as it
// is, even where it differs from f: running it again changes nothing. An
// enterprise's opening balance is one topup ledger entry with the key
// "seed:topup:<enterprise>", posted once. New apps get a random API key and
// HMAC secret (SeedOpts.NewApp). ctx bounds the transaction.
func Seed(ctx context.Context, db Beginner, f Fixture, opts SeedOpts) (SeedResult, error) {
	if opts.Clock == nil {
		return SeedResult{}, errors.New("tenancy: seed: SeedOpts.Clock is required")
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	res := SeedResult{Created: map[string]int{}, Kept: map[string]int{}}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return res, fmt.Errorf("tenancy: seed: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	s := &seeder{ctx: ctx, tx: tx, now: opts.Clock.Now().UTC(), res: &res, opts: opts}
	if err := s.seed(f); err != nil {
		return SeedResult{Created: map[string]int{}, Kept: map[string]int{}}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return SeedResult{Created: map[string]int{}, Kept: map[string]int{}}, fmt.Errorf("tenancy: seed: commit: %w", err)
	}
	return res, nil
}

func (s *seeder) seed(f Fixture) error {
	for _, c := range f.Carriers {
		if err := s.flag("sms_carrier", "SeedCarrier", c.Code, c.Name, s.now); err != nil {
			return err
		}
		for _, p := range c.Prefixes {
			if err := s.flag("sms_number_segment", "SeedSegment", p, c.Code, s.now); err != nil {
				return err
			}
		}
	}
	channels := map[string]int64{}
	for _, c := range f.Channels {
		id, err := s.row("sms_channel", "SeedChannel", c.Name, c.Supplier, c.Carrier, c.Address, c.Version, c.SPID,
			c.SecretRef, c.SrcID, c.ServiceID, c.Connections, c.Window, c.RateLimit, c.ReceiptMode, s.now)
		if err != nil {
			return err
		}
		channels[c.Name] = id
	}
	channel := func(name string) (int64, error) {
		if id, ok := channels[name]; ok {
			return id, nil
		}
		return 0, fmt.Errorf("tenancy: seed: unknown channel %s", relaytype.QuoteValue(name))
	}
	groups := map[string]int64{}
	for _, g := range f.Groups {
		id, err := s.row("sms_channel_group", "SeedGroup", g.Name, s.now)
		if err != nil {
			return err
		}
		groups[g.Name] = id
		for _, m := range g.Members {
			ch, err := channel(m.Channel)
			if err != nil {
				return err
			}
			if err := s.flag("sms_channel_group_member", "SeedMember", id, ch, m.Priority, m.Weight, s.now); err != nil {
				return err
			}
		}
	}
	for _, n := range f.Blacklist {
		if err := s.flag("sms_blacklist", "SeedBlacklist", int64(0), n, "fixture", s.now); err != nil {
			return err
		}
	}
	for _, e := range f.Enterprises {
		if err := s.enterprise(e, channel, groups); err != nil {
			return err
		}
	}
	return nil
}

func (s *seeder) enterprise(e FixtureEnterprise, channel func(string) (int64, error), groups map[string]int64) error {
	ent, err := s.row("sms_enterprise", "SeedEnterprise", e.Name, e.Title, s.now)
	if err != nil {
		return err
	}
	account, err := s.row("sms_account", "SeedAccount", ent, s.now)
	if err != nil {
		return err
	}
	if e.Balance > 0 {
		p, err := Post(s.ctx, s.tx, Entry{AccountID: account, Kind: KindTopup, IdemKey: "seed:topup:" + e.Name,
			Amount: e.Balance, Note: "opening balance (fixture)", At: s.now})
		if err != nil {
			return fmt.Errorf("tenancy: seed: %s: %w", e.Name, err)
		}
		s.count("sms_ledger", p.Created)
	}
	sigs := map[string]int64{}
	for _, g := range e.Signatures {
		id, err := s.row("sms_signature", "SeedSignature", ent, g.Text, s.now)
		if err != nil {
			return err
		}
		sigs[g.Text] = id
		for _, r := range g.Registrations {
			ch, err := channel(r.Channel)
			if err != nil {
				return err
			}
			if err := s.flag("sms_signature_registration", "SeedRegistration", id, ch, string(r.State), r.ExtCode, s.now); err != nil {
				return err
			}
		}
	}
	for _, t := range e.Templates {
		if err := s.flag("sms_template", "SeedTemplate", ent, t.Code, t.Kind, t.Body, string(t.State), s.now); err != nil {
			return err
		}
	}
	for _, n := range e.Blacklist {
		if err := s.flag("sms_blacklist", "SeedBlacklist", ent, n, "fixture", s.now); err != nil {
			return err
		}
	}
	for _, a := range e.Apps {
		if err := s.app(e.Name, ent, a, sigs, groups); err != nil {
			return err
		}
	}
	return nil
}

func (s *seeder) app(entName string, ent int64, a FixtureApp, sigs, groups map[string]int64) error {
	cred := AppCredentials{Enterprise: entName, App: a.Name, HMACSecret: make([]byte, 32)}
	key := make([]byte, 16)
	if _, err := io.ReadFull(s.opts.Rand, key); err != nil {
		return fmt.Errorf("tenancy: seed: api key: %w", err)
	}
	if _, err := io.ReadFull(s.opts.Rand, cred.HMACSecret); err != nil {
		return fmt.Errorf("tenancy: seed: hmac secret: %w", err)
	}
	cred.APIKey = hex.EncodeToString(key)
	var id int64
	var created bool
	err := s.tx.QueryRow(s.ctx, stmts["SeedApp"], ent, a.Name, cred.APIKey, cred.HMACSecret, a.DailyLimit, s.now).Scan(&id, &created)
	if err != nil {
		return fmt.Errorf("tenancy: seed sms_app %s/%s: %w", entName, a.Name, err)
	}
	s.count("sms_app", created)
	if created {
		s.res.NewApps = append(s.res.NewApps, cred)
		if s.opts.NewApp != nil {
			if err := s.opts.NewApp(cred); err != nil {
				return fmt.Errorf("tenancy: seed: keep the credentials of %s/%s: %w", entName, a.Name, err)
			}
		}
	}
	carriers := make([]string, 0, len(a.Prices))
	for c := range a.Prices {
		carriers = append(carriers, c)
	}
	sort.Strings(carriers)
	for _, c := range carriers {
		if err := s.flag("sms_price", "SeedPrice", id, c, int64(a.Prices[c]), s.now); err != nil {
			return err
		}
	}
	for _, fr := range a.Frequency {
		if err := s.flag("sms_frequency_limit", "SeedFrequency", id, int(fr.Window/time.Second), fr.Max, s.now); err != nil {
			return err
		}
	}
	for _, r := range a.Routes {
		var sig int64
		if r.Signature != "" {
			var ok bool
			if sig, ok = sigs[r.Signature]; !ok {
				return fmt.Errorf("tenancy: seed: route of %s/%s: signature not in the enterprise", entName, a.Name)
			}
		}
		g, ok := groups[r.Group]
		if !ok {
			return fmt.Errorf("tenancy: seed: route of %s/%s: unknown group %s", entName, a.Name, relaytype.QuoteValue(r.Group))
		}
		if err := s.flag("sms_route", "SeedRoute", ent, id, r.Carrier, sig, g, r.Priority, s.now); err != nil {
			return err
		}
	}
	return nil
}
