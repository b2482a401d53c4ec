package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// TestSmsAPICrash accepts 200 requests (and 5 resends) into the inbox, then
// runs the admission stage in real `relay sms api` processes killed with
// SIGKILL inside their batch transactions — the first life after a batch's
// freezes, the second before them, then lives at random at both points —
// until a last clean life has decided everything. Every accepted request is
// then decided exactly once: each admitted message has one freeze of its
// price, no refused one has any, the account's frozen amount is their sum
// and the counters count each admitted number once.
func TestSmsAPICrash(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := testbin.Relay(t)

	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	clock := relayclock.System{}
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	var cred tenancy.AppCredentials
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(n string) string { return "file:/x/" + n }),
		tenancy.SeedOpts{Clock: clock, NewApp: func(c tenancy.AppCredentials) error {
			if c.Enterprise == "yuntong" && c.App == "notify" {
				cred = c
			}
			return nil
		}})
	require.NoError(t, err)
	producer, err := relay.NewEngine(d, admit.EngineConfig(nil, "", clock, nil))
	require.NoError(t, err)
	api, err := admit.NewAPI(admit.APIConfig{Driver: d, Engine: producer, Clock: clock})
	require.NoError(t, err)

	const n = 200
	send := func(i int) int {
		body := fmt.Appendf(nil, `{"client_msg_id":"k-%d","numbers":["1381234%04d"],"content":"【云通科技】您的订单%d已发货"}`, i, i, i)
		ts := time.Now().Unix()
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(admit.HeaderKey, cred.APIKey)
		r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
		r.Header.Set(admit.HeaderSignature, admit.Sign(cred.HMACSecret, http.MethodPost, "/v1/messages", ts, body))
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		var a admit.SendAnswer
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &a), w.Body.String())
		return w.Code
	}
	for i := range n {
		require.Equal(t, http.StatusAccepted, send(i))
	}
	for i := range 5 {
		require.Equal(t, http.StatusOK, send(i*7), "a resend is a duplicate")
	}

	undecided := func() int64 {
		var k int64
		require.NoError(t, d.Pool().QueryRow(ctx, `SELECT count(*) FROM sms_message WHERE state = 'accepted'`).Scan(&k))
		return k
	}
	faults := []string{"sms.admit.after-freeze=1", "sms.admit.before-freeze=1"}
	for range 6 {
		faults = append(faults, "sms.admit.before-freeze=0.3,sms.admit.after-freeze=0.3")
	}
	faults = append(faults, "") // the last life runs clean
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for life, spec := range faults {
		if undecided() == 0 {
			break
		}
		cmd := exec.Command(bin, "sms", "api", "--postgres", url, "--migrate", "--api-addr", "127.0.0.1:0",
			"--instance-id", "crash-test")
		cmd.Env = append(os.Environ(), "RELAY_FAULTPOINTS="+spec, "RELAY_FAULTSEED="+strconv.Itoa(life))
		var log lockedBuffer // written by the child's copier, read here
		cmd.Stdout, cmd.Stderr = &log, &log
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		killed := false
	wait:
		for {
			select {
			case err := <-exited:
				require.Error(t, err, "life %d ended by itself: %s", life, log.String())
				require.Contains(t, log.String(), "faultpoint: sms.admit.", "life %d", life)
				killed = true
				break wait
			case <-time.After(100 * time.Millisecond):
				if undecided() == 0 {
					require.NoError(t, cmd.Process.Signal(os.Interrupt))
					require.NoError(t, <-exited, "life %d: %s", life, log.String())
					break wait
				}
				require.True(t, time.Now().Before(deadline), "life %d: %d undecided; %s", life, undecided(), log.String())
			}
		}
		if killed {
			kills++
		}
	}
	require.Zero(t, undecided())
	require.GreaterOrEqual(t, kills, 2)
	t.Logf("%d lives killed", kills)

	q := func(sql string) int64 {
		var v int64
		require.NoError(t, d.Pool().QueryRow(ctx, sql).Scan(&v), sql)
		return v
	}
	require.Equal(t, int64(n), q(`SELECT count(*) FROM sms_message`))
	admitted := q(`SELECT count(*) FROM sms_message WHERE state = 'admitted'`)
	require.Equal(t, int64(n), admitted, "nothing in the fixture refuses these")
	require.Zero(t, q(`SELECT count(*) FROM sms_message m WHERE m.state = 'admitted' AND
		(SELECT count(*) FROM sms_ledger l WHERE l.idem_key = 'freeze:' || m.id AND l.amount_li = m.amount_li) <> 1`),
		"one freeze of its price per admitted message")
	require.Equal(t, admitted, q(`SELECT count(*) FROM sms_ledger WHERE kind = 'freeze'`))
	require.Equal(t, q(`SELECT sum(amount_li) FROM sms_message WHERE state = 'admitted'`),
		q(`SELECT a.frozen_li FROM sms_account a JOIN sms_enterprise e ON e.id = a.enterprise_id WHERE e.name = 'yuntong'`))
	require.Equal(t, admitted, q(`SELECT sum(count) FROM sms_limit_counter WHERE key LIKE 'freq:%'`),
		"each admitted number counted once")
	st, err := producer.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), st.Counts[relaytype.StateSucceeded], "%v", st.Counts)
}
