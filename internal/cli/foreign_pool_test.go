package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
)

// The mailbox pool msgx opens on a real MariaDB is bounded.
func TestMailboxPoolIsBounded(t *testing.T) {
	t.Parallel()
	_, dsn := testdb.MariaDBWithDSN(t)
	db, err := openMailbox(context.Background(), dsn)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, foreignMaxOpenConns, db.Stats().MaxOpenConnections)
}
