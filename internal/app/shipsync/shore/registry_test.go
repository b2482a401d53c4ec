package shore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

func TestRegistryLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c1 := b.addNode(t, "ship-1")
	id, err := b.reg.Authenticate(ctx, c1)
	require.NoError(t, err)
	require.Equal(t, "ship-1", id)

	_, err = b.reg.Add(ctx, b.node(t, "ship-1", "again"), op)
	require.ErrorIs(t, err, shore.ErrNodeExists)

	// Unknown certificate: issued by the CA, never registered.
	_, err = b.reg.Authenticate(ctx, b.node(t, "ship-2", ""))
	require.ErrorIs(t, err, shore.ErrUnknownCert)

	// Rotation: two active certificates overlap, a third is refused.
	c2 := b.node(t, "ship-1", "rot2")
	_, err = b.reg.Rotate(ctx, c2, op)
	require.NoError(t, err)
	_, err = b.reg.Rotate(ctx, b.node(t, "ship-1", "rot3"), op)
	require.ErrorIs(t, err, shore.ErrTooManyCerts)
	_, err = b.reg.Authenticate(ctx, c1)
	require.NoError(t, err, "old certificate accepted during the overlap")
	_, err = b.reg.Authenticate(ctx, c2)
	require.NoError(t, err, "new certificate accepted")

	require.NoError(t, b.reg.Retire(ctx, "ship-1", pki.Fingerprint(c1), op))
	_, err = b.reg.Authenticate(ctx, c1)
	require.ErrorIs(t, err, shore.ErrCertRetired)
	require.ErrorIs(t, b.reg.Retire(ctx, "ship-1", pki.Fingerprint(c1), op), shore.ErrUnknownCert)
	_, err = b.reg.Rotate(ctx, c2, op)
	require.ErrorIs(t, err, shore.ErrCertExists, "a certificate is registered once")

	// Revocation: every certificate of the node is refused.
	require.NoError(t, b.reg.Revoke(ctx, "ship-1", op))
	_, err = b.reg.Authenticate(ctx, c2)
	require.ErrorIs(t, err, shore.ErrNodeRevoked)
	_, err = b.reg.Rotate(ctx, b.node(t, "ship-1", "rot4"), op)
	require.ErrorIs(t, err, shore.ErrNodeRevoked)
	require.ErrorIs(t, b.reg.Revoke(ctx, "nobody", op), shore.ErrUnknownNode)

	log, err := b.reg.AuditLog(ctx)
	require.NoError(t, err)
	var actions []string
	for _, e := range log {
		require.Equal(t, "tester", e.Actor)
		actions = append(actions, e.Action+" "+e.ObjectID)
	}
	require.Equal(t, []string{"node.add ship-1", "rule.allow ship-1", "cert.rotate " + pki.Fingerprint(c2),
		"cert.retire " + pki.Fingerprint(c1), "node.revoke ship-1"}, actions, "every change audited, refusals not")
	_, err = b.reg.Add(ctx, b.node(t, "ship-3", ""), shore.Audit{})
	require.ErrorContains(t, err, "actor")

	list, err := b.reg.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "revoked", list[0].NodeState)
	require.ElementsMatch(t, []string{"retired", "active"}, []string{list[0].CertState, list[1].CertState})
}

func TestRegistryCertValidityByClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.addNode(t, "ship-1")
	b.clock.Set(c.NotAfter.Add(1))
	_, err := b.reg.Authenticate(t.Context(), c)
	require.ErrorIs(t, err, shore.ErrCertRetired)
}
