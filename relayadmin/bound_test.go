package relayadmin_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// TestListingsBounded: DEAD rows whose error text JSON escapes six-fold, and
// two rows stored (before error text was bounded) with 2 MiB of it, give
// answers of at most MaxResponseBytes with every row's text bounded. A cut
// message page continues with next_after until every row was shown once; a
// cut DLQ says so.
func TestListingsBounded(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		ctx := context.Background()
		ex := d.GetExecutor()
		const rows = 100
		escaped := strings.Repeat("<", relaytype.MaxErrorText) // \u003c in JSON
		ins := make([]*relaydriver.MessageInsertParams, rows)
		done := make([]*relaydriver.MessageCompleteParams, rows)
		for i := range rows {
			ins[i] = &relaydriver.MessageInsertParams{Queue: queue, ID: int64(i + 1), Payload: []byte("secret-body"), Now: t0}
			done[i] = &relaydriver.MessageCompleteParams{Queue: queue, ID: int64(i + 1), State: relaytype.StateDead,
				ErrorClass: relaytype.ClassMalformed, LastError: escaped, Now: t0}
		}
		_, err := ex.MessageInsertMany(ctx, ins)
		require.NoError(t, err)
		require.NoError(t, ex.MessageCompleteMany(ctx, done))
		huge := strings.Repeat("payload ", 2<<20/8)
		_, err = ex.Exec(ctx, "UPDATE relay_message SET last_error = $1 WHERE queue = $2 AND id IN (1, 2)", huge, queue)
		require.NoError(t, err)

		var evs []*relaydriver.OutboxAppendParams
		for i := range rows {
			evs = append(evs, &relaydriver.OutboxAppendParams{Event: relaytype.Event{ID: fmt.Sprintf("ev-%d", i), Target: target, Topic: "t",
				Key: fmt.Sprintf("k%d", i), Type: relaydriver.OutboxUpsert, Payload: []byte("secret-body")}, Now: t0})
		}
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		appended, err := tx.OutboxAppend(ctx, evs)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		for _, a := range appended {
			_, err := ex.OutboxFail(ctx, &relaydriver.OutboxFailParams{ID: a.ID, Error: escaped,
				NextAttemptAt: t0.Add(time.Minute), MaxAttempts: 1, Now: t0})
			require.NoError(t, err)
		}

		srv := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: d, Queue: queue,
			OutboxTargets: []string{target}, Logger: slog.New(slog.DiscardHandler)}))
		t.Cleanup(srv.Close)

		seen := map[int64]int{}
		pages := 0
		for after := int64(0); ; pages++ {
			var page relayadmin.MessagePage
			code, raw := call(t, srv, http.MethodGet, fmt.Sprintf("/admin/dead?limit=1000&after=%d", after), "", &page)
			require.Equal(t, http.StatusOK, code)
			require.LessOrEqual(t, len(raw), relayadmin.MaxResponseBytes)
			for _, m := range page.Items {
				seen[m.ID]++
				require.LessOrEqual(t, len(m.LastError), relaytype.MaxErrorText, "message %d", m.ID)
			}
			if page.NextAfter == 0 {
				break
			}
			after = page.NextAfter
		}
		require.Greater(t, pages, 0, "the rows do not fit one answer")
		require.Len(t, seen, rows)
		for id, n := range seen {
			require.Equal(t, 1, n, "message %d", id)
		}

		var dlq relayadmin.DLQ
		code, raw := call(t, srv, http.MethodGet, "/admin/dlq?limit=1000", "", &dlq)
		require.Equal(t, http.StatusOK, code)
		require.LessOrEqual(t, len(raw), relayadmin.MaxResponseBytes)
		require.True(t, dlq.Truncated)
		require.NotEmpty(t, dlq.Items)
		require.Less(t, len(dlq.Items), rows)
	})
}
