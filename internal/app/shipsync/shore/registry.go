package shore

import (
	"context"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Line is the name of shipsync's migration line.
const Line = "shipsync"

// MaxActiveCerts is how many certificates a node may have active at once:
// the old and the new one during a rotation's overlap window.
const MaxActiveCerts = 2

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("shore/queries.sql", queriesSQL,
	"NodeInsert", "NodeLock", "NodeSetState", "CertInsert", "CertActiveCount", "CertRetire", "CertLookup",
	"NodeList", "BatchAnswer", "BatchInsert", "NodeInboxCount", "NodeHeartbeat", "EventHashes", "EventInsertMany",
	"EventSavepoint", "EventSavepointRelease", "EventSavepointRollback", "AuditInsert", "AuditList", "RuleAllow", "RuleList",
	"StreamLockMany", "StreamHeld", "StreamHeldAt", "SkipInsertMany", "SkipPass", "EventRelease", "StreamUpdateMany", "RuleInsert", "RuleGetMany", "RuleRegistered", "ReceiptPage", "StreamGapsDue", "ResendInsert", "ResendList",
	"ShoreEventInsertMany", "ShoreBlockedFirst", "DownlinkTargets", "DownlinkAllocate", "CommandInsertMany", "CommandPage",
	"CommandAckMany", "DownlinkAdvance", "DownlinkState", "InboxEventGet", "ConflictActiveGet", "ConflictCreate",
	"ConflictEvidenceAdd", "DecisionApplied", "HeadFollowShore")

// eventInsertNew is EventInsertMany without its ON CONFLICT clause, for a
// batch none of whose events is stored yet (insertEvents): any unique
// violation fails the statement. A plain insert checks each unique index as
// it inserts the entry; ON CONFLICT DO NOTHING first probes every unique
// index of the table for every row, then inserts it speculatively and
// confirms it (one more WAL record per row). Derived, so that the two
// never list different columns.
var eventInsertNew = func() string {
	const clause = "ON CONFLICT DO NOTHING\n"
	q := stmts["EventInsertMany"]
	if !strings.Contains(q, clause) {
		panic("shore: EventInsertMany has no " + clause) // cannot happen: the file is embedded
	}
	return strings.Replace(q, clause, "", 1)
}()

// MigrationLine returns shipsync's migration line (migration/shipsync,
// PostgreSQL only), for relaymigrate.Up and relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("shore: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// MigrationLines are every line the shore's database needs, in order: the
// engine's (the apply queue lives in it) and shipsync's.
func MigrationLines(d relaydriver.Driver) []relaymigrate.Line {
	return []relaymigrate.Line{relaymigrate.EngineLineOf(d), MigrationLine()}
}

// Registry errors.
var (
	// ErrNodeExists: node add for a node id already registered.
	ErrNodeExists = errors.New("shore: node already registered")
	// ErrUnknownNode: no such node.
	ErrUnknownNode = errors.New("shore: unknown node")
	// ErrNodeRevoked: the node is revoked.
	ErrNodeRevoked = errors.New("shore: node revoked")
	// ErrCertExists: the certificate is already registered.
	ErrCertExists = errors.New("shore: certificate already registered")
	// ErrTooManyCerts: a rotation would leave more than MaxActiveCerts
	// active certificates.
	ErrTooManyCerts = errors.New("shore: too many active certificates")
	// ErrUnknownCert: the certificate is not registered (or not active for
	// the node, for Retire).
	ErrUnknownCert = errors.New("shore: unknown certificate")
	// ErrCertRetired: the certificate was retired.
	ErrCertRetired = errors.New("shore: certificate retired")
	// ErrCertNodeMismatch: the certificate names another node than the one
	// registered for it.
	ErrCertNodeMismatch = errors.New("shore: certificate names another node")
)

// Audit says who changes the registry and why; every change writes an
// append-only sync_audit_event row in its own transaction.
type Audit struct {
	// Actor is the operator (a user name). Required.
	Actor string
	// Reason is free text, optional.
	Reason string
}

func (a Audit) validate() error {
	if a.Actor == "" {
		return errors.New("shore: audit actor is empty (who makes this change?)")
	}
	return nil
}

// audit appends one audit row in tx, with the trace id ctx carries
// (WithTrace).
func audit(ctx context.Context, tx pgx.Tx, at time.Time, a Audit, action, objType, objID string, before, after *string) error {
	_, err := tx.Exec(ctx, stmts["AuditInsert"], at, a.Actor, action, objType, objID, before, after, a.Reason, TraceOf(ctx))
	return err
}

// traceKey is the context key of WithTrace.
type traceKey struct{}

// WithTrace returns ctx carrying trace, the id of the request on whose
// behalf audit entries written under it are made (the management API's
// request id): each entry records it.
func WithTrace(ctx context.Context, trace string) context.Context {
	return context.WithValue(ctx, traceKey{}, trace)
}

// TraceOf returns the trace id ctx carries ("" : none).
func TraceOf(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}

// RecordAuditChange appends an audit row in tx like RecordAudit, with a
// summary of the object before the change too (payload-free).
func RecordAuditChange(ctx context.Context, tx pgx.Tx, at time.Time, a Audit, action, objType, objID, before, after string) error {
	if err := a.validate(); err != nil {
		return err
	}
	return audit(ctx, tx, at, a, action, objType, objID, &before, &after)
}

func ptr(s string) *string { return &s }

// RecordAudit appends an audit row in tx: at, who (a), what was done to
// which object, and the state after (payload-free).
func RecordAudit(ctx context.Context, tx pgx.Tx, at time.Time, a Audit, action, objType, objID, after string) error {
	if err := a.validate(); err != nil {
		return err
	}
	return audit(ctx, tx, at, a, action, objType, objID, nil, &after)
}

// AuditEvent is one row of the audit log.
type AuditEvent struct {
	At                                                         time.Time
	Actor, Action, ObjectType, ObjectID, Before, After, Reason string
}

// AuditLog returns the audit log, oldest first.
func (r *Registry) AuditLog(ctx context.Context) ([]AuditEvent, error) {
	rows, err := r.pool.Query(ctx, stmts["AuditList"])
	if err != nil {
		return nil, fmt.Errorf("shore: audit log: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		err := row.Scan(&e.At, &e.Actor, &e.Action, &e.ObjectType, &e.ObjectID, &e.Before, &e.After, &e.Reason)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("shore: audit log: %w", err)
	}
	return out, nil
}

// Registry is the node registry in PostgreSQL. It is safe for concurrent
// use.
type Registry struct {
	pool  *pgxpool.Pool
	clock relaytype.Clock
}

// NewRegistry returns the registry on pool; clock stamps its rows.
func NewRegistry(pool *pgxpool.Pool, clock relaytype.Clock) *Registry {
	return &Registry{pool: pool, clock: clock}
}

// Add registers the node named by cert (pki.NodeID) as active with cert as
// its first active certificate. It refuses a node id already registered
// (ErrNodeExists), whether active or revoked: a revoked id is not reused.
func (r *Registry) Add(ctx context.Context, cert *x509.Certificate, a Audit) (string, error) {
	if err := a.validate(); err != nil {
		return "", err
	}
	id, err := pki.NodeID(cert)
	if err != nil {
		return "", err
	}
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		now := r.clock.Now()
		if _, err := tx.Exec(ctx, stmts["NodeInsert"], id, now); err != nil {
			if isUnique(err) {
				return fmt.Errorf("%w: %s", ErrNodeExists, id)
			}
			return err
		}
		if err := insertCert(ctx, tx, id, cert, now); err != nil {
			return err
		}
		return audit(ctx, tx, now, a, "node.add", "node", id, nil, ptr("active, certificate "+pki.Fingerprint(cert)))
	})
	if err != nil {
		return "", fmt.Errorf("shore: add node: %w", err)
	}
	return id, nil
}

// Rotate registers cert as a further active certificate of its (active)
// node: both the old and the new certificate are accepted until Retire ends
// the overlap. It refuses a third active certificate (ErrTooManyCerts).
func (r *Registry) Rotate(ctx context.Context, cert *x509.Certificate, a Audit) (string, error) {
	if err := a.validate(); err != nil {
		return "", err
	}
	id, err := pki.NodeID(cert)
	if err != nil {
		return "", err
	}
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, id); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, stmts["CertActiveCount"], id).Scan(&n); err != nil {
			return err
		}
		if n >= MaxActiveCerts {
			return fmt.Errorf("%w: node %s has %d; retire one first", ErrTooManyCerts, id, n)
		}
		now := r.clock.Now()
		if err := insertCert(ctx, tx, id, cert, now); err != nil {
			return err
		}
		return audit(ctx, tx, now, a, "cert.rotate", "certificate", pki.Fingerprint(cert), nil, ptr("active for node "+id))
	})
	if err != nil {
		return "", fmt.Errorf("shore: rotate node certificate: %w", err)
	}
	return id, nil
}

// Retire ends an active certificate of node (by pki.Fingerprint): requests
// presenting it are refused from now on.
func (r *Registry) Retire(ctx context.Context, nodeID, fingerprint string, a Audit) error {
	if err := a.validate(); err != nil {
		return err
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		now := r.clock.Now()
		tag, err := tx.Exec(ctx, stmts["CertRetire"], nodeID, fingerprint, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: no active certificate %s of node %s", ErrUnknownCert, fingerprint, nodeID)
		}
		return audit(ctx, tx, now, a, "cert.retire", "certificate", fingerprint, ptr("active"), ptr("retired"))
	})
	if err != nil {
		return fmt.Errorf("shore: retire certificate: %w", err)
	}
	return nil
}

// Revoke marks node revoked: its new requests are refused with 403, its
// inbox rows stay and are processed. Revoking a revoked node is a no-op.
func (r *Registry) Revoke(ctx context.Context, nodeID string, a Audit) error {
	if err := a.validate(); err != nil {
		return err
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, stmts["NodeLock"], nodeID).Scan(&state); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrUnknownNode, nodeID)
		} else if err != nil {
			return err
		}
		now := r.clock.Now()
		if _, err := tx.Exec(ctx, stmts["NodeSetState"], nodeID, "revoked", now); err != nil {
			return err
		}
		return audit(ctx, tx, now, a, "node.revoke", "node", nodeID, ptr(state), ptr("revoked"))
	})
	if err != nil {
		return fmt.Errorf("shore: revoke node: %w", err)
	}
	return nil
}

// NodeCert is one row of List.
type NodeCert struct {
	NodeID, NodeState string
	// Fingerprint and CertState are empty for a node without certificates.
	Fingerprint, CertState string
	NotAfter               time.Time
}

// List returns every node and its certificates, by node id.
func (r *Registry) List(ctx context.Context) ([]NodeCert, error) {
	rows, err := r.pool.Query(ctx, stmts["NodeList"])
	if err != nil {
		return nil, fmt.Errorf("shore: list nodes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NodeCert, error) {
		var c NodeCert
		var fp, st *string
		var na *time.Time
		err := row.Scan(&c.NodeID, &c.NodeState, &fp, &st, &na)
		if fp != nil {
			c.Fingerprint, c.CertState, c.NotAfter = *fp, *st, *na
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("shore: list nodes: %w", err)
	}
	return out, nil
}

// Authenticate returns the node a verified client certificate belongs to:
// the certificate must be registered (ErrUnknownCert), active
// (ErrCertRetired), within its validity at the clock's now, registered for
// the node it names (ErrCertNodeMismatch), and the node active
// (ErrNodeRevoked).
func (r *Registry) Authenticate(ctx context.Context, cert *x509.Certificate) (string, error) {
	id, err := pki.NodeID(cert)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnknownCert, err)
	}
	var nodeID, nodeState, certState string
	var nb, na time.Time
	err = r.pool.QueryRow(ctx, stmts["CertLookup"], pki.Fingerprint(cert)).Scan(&nodeID, &nodeState, &certState, &nb, &na)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", ErrUnknownCert
	case err != nil:
		return "", fmt.Errorf("shore: authenticate: %w", err)
	case nodeID != id:
		return "", ErrCertNodeMismatch
	case nodeState != "active":
		return id, ErrNodeRevoked
	case certState != "active":
		return id, ErrCertRetired
	}
	if now := r.clock.Now(); now.Before(nb) || now.After(na) {
		return id, fmt.Errorf("%w: outside its validity", ErrCertRetired)
	}
	return id, nil
}

func lockActive(ctx context.Context, tx pgx.Tx, id string) error {
	var state string
	if err := tx.QueryRow(ctx, stmts["NodeLock"], id).Scan(&state); errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrUnknownNode, id)
	} else if err != nil {
		return err
	}
	if state != "active" {
		return fmt.Errorf("%w: %s", ErrNodeRevoked, id)
	}
	return nil
}

func insertCert(ctx context.Context, tx pgx.Tx, id string, cert *x509.Certificate, now time.Time) error {
	_, err := tx.Exec(ctx, stmts["CertInsert"], pki.Fingerprint(cert), id, cert.NotBefore, cert.NotAfter, now)
	if isUnique(err) {
		return fmt.Errorf("%w: %s", ErrCertExists, pki.Fingerprint(cert))
	}
	return err
}

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// AllowRule lets the active node upload events of rule ruleID at version
// (≥ 1). Allowing it again is a no-op (and not audited again).
func (r *Registry) AllowRule(ctx context.Context, nodeID, ruleID string, version uint64, a Audit) error {
	if err := a.validate(); err != nil {
		return err
	}
	if ruleID == "" || version < 1 || version > math.MaxInt64 {
		return fmt.Errorf("shore: allow rule: rule id must be set and version ≥ 1")
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, nodeID); err != nil {
			return err
		}
		now := r.clock.Now()
		tag, err := tx.Exec(ctx, stmts["RuleAllow"], nodeID, ruleID, int64(version), now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return audit(ctx, tx, now, a, "rule.allow", "node", nodeID, nil, ptr(fmt.Sprintf("rule %s version %d", ruleID, version)))
	})
	if err != nil {
		return fmt.Errorf("shore: allow rule: %w", err)
	}
	return nil
}

// Rules returns the rule versions node may upload, by rule id and version.
func (r *Registry) Rules(ctx context.Context, q Querier, nodeID string) ([]*pb.RuleRef, error) {
	rows, err := q.Query(ctx, stmts["RuleList"], nodeID)
	if err != nil {
		return nil, fmt.Errorf("shore: rules of node: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*pb.RuleRef, error) {
		var ref pb.RuleRef
		var v int64
		err := row.Scan(&ref.RuleId, &v)
		ref.RuleVersion = uint64(v)
		return &ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("shore: rules of node: %w", err)
	}
	return out, nil
}

// Querier runs queries: *pgxpool.Pool and pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
