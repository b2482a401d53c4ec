package shore

import (
	"context"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/sqlfile"
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
	"NodeList", "BatchAnswer", "BatchInsert", "NodeInboxCount", "NodeHeartbeat", "EventHashes", "EventInsertMany")

// MigrationLine returns shipsync's migration line (migration/shipsync,
// PostgreSQL only), for relaymigrate.Up and relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("shore: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
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
func (r *Registry) Add(ctx context.Context, cert *x509.Certificate) (string, error) {
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
		return insertCert(ctx, tx, id, cert, now)
	})
	if err != nil {
		return "", fmt.Errorf("shore: add node: %w", err)
	}
	return id, nil
}

// Rotate registers cert as a further active certificate of its (active)
// node: both the old and the new certificate are accepted until Retire ends
// the overlap. It refuses a third active certificate (ErrTooManyCerts).
func (r *Registry) Rotate(ctx context.Context, cert *x509.Certificate) (string, error) {
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
		return insertCert(ctx, tx, id, cert, r.clock.Now())
	})
	if err != nil {
		return "", fmt.Errorf("shore: rotate node certificate: %w", err)
	}
	return id, nil
}

// Retire ends an active certificate of node (by pki.Fingerprint): requests
// presenting it are refused from now on.
func (r *Registry) Retire(ctx context.Context, nodeID, fingerprint string) error {
	tag, err := r.pool.Exec(ctx, stmts["CertRetire"], nodeID, fingerprint, r.clock.Now())
	if err != nil {
		return fmt.Errorf("shore: retire certificate: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("shore: retire certificate: %w: no active certificate %s of node %s", ErrUnknownCert,
			fingerprint, nodeID)
	}
	return nil
}

// Revoke marks node revoked: its new requests are refused with 403, its
// inbox rows stay and are processed. Revoking a revoked node is a no-op.
func (r *Registry) Revoke(ctx context.Context, nodeID string) error {
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, stmts["NodeLock"], nodeID).Scan(&state); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrUnknownNode, nodeID)
		} else if err != nil {
			return err
		}
		_, err := tx.Exec(ctx, stmts["NodeSetState"], nodeID, "revoked", r.clock.Now())
		return err
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
