package tenancy

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// Line is the name of the send chain's migration line.
const Line = "sms"

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("tenancy/queries.sql", queriesSQL,
	"LoadCarriers", "LoadSegments", "LoadEnterprises", "LoadApps", "LoadChannels", "LoadSignatures",
	"LoadRegistrations", "LoadTemplates", "LoadBlacklist", "LoadGroups", "LoadRoutes", "LoadPrices",
	"LoadFrequency", "AppSecret", "AccountLock", "AccountOf", "LedgerByKey", "LedgerByKeys", "LedgerInsert", "LedgerInsertMany", "AccountSet",
	"SeedCarrier", "SeedSegment", "SeedEnterprise", "SeedAccount", "SeedApp", "SeedChannel", "SeedSignature",
	"SeedRegistration", "SeedTemplate", "SeedBlacklist", "SeedGroup", "SeedMember", "SeedRoute", "SeedPrice",
	"SeedFrequency", "Balances", "RulesVersion")

// MigrationLines returns every migration line the send chain needs besides
// the engine's: relaywork's (the completion's work records) and the send
// chain's own (MigrationLine), in the order to apply them.
func MigrationLines() []relaymigrate.Line {
	return []relaymigrate.Line{relaywork.MigrationLine(), MigrationLine()}
}

// MigrationLine returns the send chain's migration line (the embedded files
// migration/sms/NNN_name.up.sql, PostgreSQL only). Apply it with
// relaymigrate.Up on a relaypgx driver; check it with relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("tenancy: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// Querier is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts transactions: *pgxpool.Pool and *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Load reads every rule in one read-only, repeatable-read transaction (one
// consistent view of all tables) and returns it as a snapshot taken at
// clock's now. ctx bounds the reads.
//
// It reads every tenant's rows, blacklists included: right for the fixture
// and for tens of thousands of rows; a platform with millions of blacklisted
// numbers would check those per batch in SQL instead (docs/sms/model.md).
func Load(ctx context.Context, db Beginner, clock relaytype.Clock) (*rules.Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("tenancy: load: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	s, err := LoadTx(ctx, tx, clock.Now())
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("tenancy: load: commit: %w", err)
	}
	return s, nil
}

// BatchSender sends a batch of queries in one round trip: pgx.Tx,
// *pgx.Conn and *pgxpool.Pool.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// LoadTx is Load inside the caller's transaction tx (whose isolation decides
// how consistent the view is), stamping the snapshot takenAt. The thirteen
// queries go in one round trip (a pgx batch).
func LoadTx(ctx context.Context, tx BatchSender, takenAt time.Time) (*rules.Snapshot, error) {
	d := rules.Data{TakenAt: takenAt}
	type step struct {
		name string
		row  func(pgx.Rows) error
	}
	var steps []step
	run := func(name string, row func(pgx.Rows) error) { steps = append(steps, step{name, row}) }
	run("LoadCarriers", func(r pgx.Rows) error {
		var c rules.Carrier
		err := r.Scan(&c.Code, &c.Name)
		d.Carriers = append(d.Carriers, c)
		return err
	})
	run("LoadSegments", func(r pgx.Rows) error {
		var g rules.NumberSegment
		err := r.Scan(&g.Prefix, &g.Carrier)
		d.Segments = append(d.Segments, g)
		return err
	})
	run("LoadEnterprises", func(r pgx.Rows) error {
		var e rules.Enterprise
		err := r.Scan(&e.ID, &e.Name, &e.Active)
		d.Enterprises = append(d.Enterprises, e)
		return err
	})
	run("LoadApps", func(r pgx.Rows) error {
		var a rules.App
		var limit int32
		err := r.Scan(&a.ID, &a.EnterpriseID, &a.Name, &a.APIKey, &a.Active, &limit)
		a.DailyLimit = int(limit)
		d.Apps = append(d.Apps, a)
		return err
	})
	run("LoadChannels", func(r pgx.Rows) error {
		var c rules.Channel
		var conns, window, rate int32
		var state string
		err := r.Scan(&c.ID, &c.Name, &c.Supplier, &c.Carrier, &c.Address, &c.CMPPVersion, &c.SPID, &c.SecretRef,
			&c.SrcID, &c.ServiceID, &conns, &window, &rate, &c.ReceiptMode, &c.Active, &state)
		c.Connections, c.Window, c.RateLimit, c.ConnState = int(conns), int(window), int(rate), rules.ConnState(state)
		d.Channels = append(d.Channels, c)
		return err
	})
	run("LoadSignatures", func(r pgx.Rows) error {
		var g rules.Signature
		err := r.Scan(&g.ID, &g.EnterpriseID, &g.Text, &g.Active)
		d.Signatures = append(d.Signatures, g)
		return err
	})
	run("LoadRegistrations", func(r pgx.Rows) error {
		var g rules.Registration
		var state string
		err := r.Scan(&g.SignatureID, &g.ChannelID, &state, &g.ExtCode)
		g.State = rules.RegState(state)
		d.Registrations = append(d.Registrations, g)
		return err
	})
	run("LoadTemplates", func(r pgx.Rows) error {
		var t rules.Template
		var state string
		err := r.Scan(&t.ID, &t.EnterpriseID, &t.Code, &t.Kind, &t.Body, &state)
		t.State = rules.TemplateState(state)
		d.Templates = append(d.Templates, t)
		return err
	})
	run("LoadBlacklist", func(r pgx.Rows) error {
		var b rules.BlacklistEntry
		err := r.Scan(&b.EnterpriseID, &b.Number)
		d.Blacklist = append(d.Blacklist, b)
		return err
	})
	run("LoadGroups", func(r pgx.Rows) error {
		var id, channel int64
		var name string
		var prio, weight int32
		if err := r.Scan(&id, &name, &channel, &prio, &weight); err != nil {
			return err
		}
		if n := len(d.Groups); n == 0 || d.Groups[n-1].ID != id {
			d.Groups = append(d.Groups, rules.ChannelGroup{ID: id, Name: name})
		}
		if channel != 0 {
			g := &d.Groups[len(d.Groups)-1]
			g.Members = append(g.Members, rules.GroupMember{ChannelID: channel, Priority: int(prio), Weight: int(weight)})
		}
		return nil
	})
	run("LoadRoutes", func(r pgx.Rows) error {
		var rt rules.Route
		var prio int32
		err := r.Scan(&rt.ID, &rt.AppID, &rt.Carrier, &rt.SignatureID, &rt.GroupID, &prio)
		rt.Priority = int(prio)
		d.Routes = append(d.Routes, rt)
		return err
	})
	run("LoadPrices", func(r pgx.Rows) error {
		var p rules.PriceRule
		var unit int64
		err := r.Scan(&p.AppID, &p.Carrier, &unit)
		p.Unit = rules.Money(unit)
		d.Prices = append(d.Prices, p)
		return err
	})
	run("LoadFrequency", func(r pgx.Rows) error {
		var f rules.FrequencyRule
		var window, maxCount int32
		err := r.Scan(&f.AppID, &window, &maxCount)
		f.Window, f.Max = time.Duration(window)*time.Second, int(maxCount)
		d.Frequency = append(d.Frequency, f)
		return err
	})
	var batch pgx.Batch
	for _, st := range steps {
		batch.Queue(stmts[st.name])
	}
	br := tx.SendBatch(ctx, &batch)
	for _, st := range steps {
		if err := scan(br, st.name, st.row); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("tenancy: load: %w", err)
	}
	s, err := rules.NewSnapshot(d)
	if err != nil {
		return nil, fmt.Errorf("tenancy: load: %w", err)
	}
	return s, nil
}

// scan reads the next result of br, query name, calling row for each row.
func scan(br pgx.BatchResults, name string, row func(pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("tenancy: %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return fmt.Errorf("tenancy: %s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("tenancy: %s: %w", name, err)
	}
	return nil
}

// AppSecret returns the id and HMAC secret of the active app (of an active
// enterprise) whose API key is apiKey; relaytype.ErrNotFound otherwise. The
// secret is for verifying one request: never log or keep it.
func AppSecret(ctx context.Context, q Querier, apiKey string) (int64, []byte, error) {
	var id int64
	var secret []byte
	err := q.QueryRow(ctx, stmts["AppSecret"], apiKey).Scan(&id, &secret)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, fmt.Errorf("tenancy: app secret: %w", relaytype.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("tenancy: app secret: %w", err)
	}
	return id, secret, nil
}
