package pki_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/relayclock"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T) pki.Dir {
	t.Helper()
	d := pki.Dir{Path: filepath.Join(t.TempDir(), "pki"), Clock: relayclock.NewFake(t0)}
	_, err := d.InitCA()
	require.NoError(t, err)
	return d
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func TestIssueVerifiesAndModes(t *testing.T) {
	t.Parallel()
	d := setup(t)
	srv, err := d.IssueServer([]string{"shore.example", "127.0.0.1"})
	require.NoError(t, err)
	node, err := d.IssueNode("ship-7", "")
	require.NoError(t, err)

	require.Equal(t, os.FileMode(0o700), mode(t, d.Path))
	for _, f := range []string{pki.CAKeyFile, pki.ServerKeyFile, "node-ship-7.key"} {
		require.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(d.Path, f)), f)
	}

	ca, err := pki.ReadCert(filepath.Join(d.Path, pki.CACertFile))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err = srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: "shore.example", CurrentTime: t0})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", srv.IPAddresses[0].String())
	_, err = node.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: t0,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = node.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: t0.Add(2 * pki.CertValidityDefault),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "expired")

	id, err := pki.NodeID(node)
	require.NoError(t, err)
	require.Equal(t, "ship-7", id)
	_, err = pki.NodeID(srv)
	require.Error(t, err, "a server certificate names no node")
	require.Len(t, pki.Fingerprint(node), 64)
}

func TestNeverOverwrites(t *testing.T) {
	t.Parallel()
	d := setup(t)
	_, err := d.InitCA()
	require.ErrorIs(t, err, pki.ErrExists)
	first, err := d.IssueNode("ship-1", "")
	require.NoError(t, err)
	_, err = d.IssueNode("ship-1", "")
	require.ErrorIs(t, err, pki.ErrExists)
	again, err := pki.ReadCert(filepath.Join(d.Path, "node-ship-1.crt"))
	require.NoError(t, err)
	require.Equal(t, pki.Fingerprint(first), pki.Fingerprint(again), "the first certificate is untouched")

	// A rotation: a second certificate for the same node, another name.
	second, err := d.IssueNode("ship-1", "node-ship-1-2")
	require.NoError(t, err)
	require.NotEqual(t, pki.Fingerprint(first), pki.Fingerprint(second))
	id, err := pki.NodeID(second)
	require.NoError(t, err)
	require.Equal(t, "ship-1", id)

	_, err = d.IssueServer(nil)
	require.NoError(t, err)
	_, err = d.IssueServer(nil)
	require.ErrorIs(t, err, pki.ErrExists)
}

func TestRefusesBadInput(t *testing.T) {
	t.Parallel()
	d := setup(t)
	for _, id := range []string{"", "../x", "a/b", "-x", "a b"} {
		_, err := d.IssueNode(id, "")
		require.Error(t, err, id)
	}
	_, err := d.IssueNode("ok", "../escape")
	require.Error(t, err)
	empty := pki.Dir{Path: t.TempDir(), Clock: relayclock.NewFake(t0)}
	_, err = empty.IssueNode("ship-1", "")
	require.ErrorContains(t, err, "run init first")
}
