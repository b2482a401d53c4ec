package shore_test

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// op is the audit identity of the tests' registry changes.
var op = shore.Audit{Actor: "tester", Reason: "test"}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// bundle is what setup gives a test: a migrated schema, the registry, a
// fake clock and a PKI directory with a CA and a server certificate.
type bundle struct {
	d     *relaypgx.Driver
	reg   *shore.Registry
	clock *relayclock.Fake
	pki   pki.Dir
}

func setup(t testing.TB) *bundle {
	t.Helper()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(t0)
	_, err := relaymigrate.Up(t.Context(), d, clock, shore.MigrationLines(d)...)
	require.NoError(t, err)
	p := pki.Dir{Path: filepath.Join(t.TempDir(), "pki"), Clock: clock}
	_, err = p.InitCA()
	require.NoError(t, err)
	_, err = p.IssueServer(nil)
	require.NoError(t, err)
	return &bundle{d: d, reg: shore.NewRegistry(d.Pool(), clock), clock: clock, pki: p}
}

// node issues a certificate for id under name.
func (b *bundle) node(t testing.TB, id, name string) *x509.Certificate {
	t.Helper()
	c, err := b.pki.IssueNode(id, name)
	require.NoError(t, err)
	return c
}

// addNode issues and registers node id, allowed rule voyage-log version 1.
func (b *bundle) addNode(t testing.TB, id string) *x509.Certificate {
	t.Helper()
	c := b.node(t, id, "")
	_, err := b.reg.Add(context.Background(), c, op)
	require.NoError(t, err)
	require.NoError(t, b.reg.AllowRule(context.Background(), id, "voyage-log", 1, op))
	return c
}
