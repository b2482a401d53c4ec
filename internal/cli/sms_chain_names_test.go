package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChainAppName: the chain's sessions are named after the connection
// string's application_name when it has one (a harness names every role's
// sessions under its own name that way), after the instance otherwise.
func TestChainAppName(t *testing.T) {
	t.Setenv("PGAPPNAME", "")
	require.Equal(t, "relay-sms-w1", chainAppName("postgres://u:p@localhost/db", "w1"))
	require.Equal(t, "relay-chaos-abc", chainAppName("postgres://u:p@localhost/db?application_name=relay-chaos-abc", "w1"))
	require.Equal(t, "harness", chainAppName("host=localhost dbname=db application_name='harness'", "w1"))
	require.Equal(t, "relay-sms-w1", chainAppName("not a connection string ::", "w1"))
}
