package relayhttp_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayhttp"
)

// A handler that authenticates its users itself may listen off loopback
// without a listener token; the Host check still applies.
func TestHandlerAuthenticates(t *testing.T) {
	t.Parallel()
	s := start(t, relayhttp.Config{Addr: "0.0.0.0:0", HandlerAuthenticates: true})
	require.False(t, s.Addr().(*net.TCPAddr).IP.IsLoopback())
	code, _ := do(t, s, nil, request{host: "evil.example"})
	require.Equal(t, http.StatusMisdirectedRequest, code)
	code, _ = do(t, s, nil, request{})
	require.Equal(t, http.StatusOK, code)
}
