package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/relayclock"
)

// lines is a writer that hands each write to the test as one line.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// TestSupplierProgress: a stats line every interval of the injected clock,
// and the summary with the elapsed time when Serve returns.
func TestSupplierProgress(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(time.Date(2026, 9, 20, 2, 0, 0, 0, time.UTC))
	srv, err := supplier.New(supplier.Config{Accounts: []supplier.Account{{SourceAddr: "901234", Secret: "x"}}, Clock: clock})
	require.NoError(t, err)
	defer srv.Close()
	out := make(lines, 1)
	served := make(chan error, 1)
	done := make(chan error, 1)
	go func() { done <- supplierProgress(out, clock, 10*time.Second, srv, served) }()
	for range 2 {
		require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 10*time.Second, time.Millisecond)
		clock.Advance(10 * time.Second)
		require.Regexp(t, `^sms supplier: conns=0 logins=0 .* held=0\n$`, <-out)
	}
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 10*time.Second, time.Millisecond)
	served <- nil
	require.Regexp(t, `^sms supplier: stopped after 20s: conns=0 `, <-out)
	require.NoError(t, <-done)
}
