package cli_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsAPI seeds the fixture, starts `relay sms api` on a free loopback
// port and sends a signed request over HTTP, with the credentials file the
// seed wrote: 202, then the stage admits it (GET shows it admitted with its
// price). The command stops cleanly when its context ends.
func TestSmsAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	var out bytes.Buffer
	require.NoError(t, cli.Run(ctx, []string{"sms", "seed-data", "--postgres", url, "--migrate", "--secrets-dir", dir}, &out, &out),
		out.String())
	creds, err := os.ReadFile(filepath.Join(dir, "app-yuntong-otp.credentials"))
	require.NoError(t, err)
	key := regexp.MustCompile(`(?m)^api_key=(\S+)$`).FindSubmatch(creds)[1]
	secret, err := hex.DecodeString(string(regexp.MustCompile(`(?m)^hmac_secret=(\S+)$`).FindSubmatch(creds)[1]))
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	var log lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(runCtx, []string{"sms", "api", "--postgres", url, "--migrate", "--api-addr", "127.0.0.1:0"}, &log, &log)
	}()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	require.Eventually(t, func() bool { return listening.MatchString(log.String()) }, 30*time.Second, 20*time.Millisecond,
		"%s", log.String())
	base := listening.FindStringSubmatch(log.String())[1]

	do := func(method, path string, body []byte) (int, map[string]any) {
		ts := time.Now().Unix()
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(admit.HeaderKey, string(key))
		req.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(admit.HeaderSignature, admit.Sign(secret, method, path, ts, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return resp.StatusCode, m
	}
	body := []byte(`{"client_msg_id":"cli-1","numbers":["13812345678"],"template":"otp","sign_name":"云通科技",` +
		`"params":{"code":"4321","minutes":"5"}}`)
	status, m := do(http.MethodPost, "/v1/messages", body)
	require.Equal(t, http.StatusAccepted, status, m)
	path := "/v1/messages/" + strconv.FormatInt(int64(m["message_id"].(float64)), 10)
	require.Eventually(t, func() bool {
		_, m = do(http.MethodGet, path, nil)
		return m["state"] == "admitted"
	}, 30*time.Second, 50*time.Millisecond, "%v", m)
	require.EqualValues(t, 45, m["amount_li"])

	cancel()
	require.NoError(t, <-done)
	require.False(t, strings.Contains(log.String(), hex.EncodeToString(secret)), "the secret is never logged")
}
