package msgx_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

// sqlBlocks returns the ```sql blocks of a markdown file.
func sqlBlocks(t *testing.T, path string) []string {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		out = append(out, m[1])
	}
	return out
}

// statements splits SQL text into its statements, without -- comments.
func statements(block string) []string {
	var b strings.Builder
	for line := range strings.Lines(block) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	var out []string
	for s := range strings.SplitSeq(b.String(), ";") {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestDataModelQueries keeps docs/msgx/data-model.md true: every query it
// offers runs on a migrated msgx schema (PostgreSQL) or on a mailbox created
// as `relay msgx mailbox create` creates it (MariaDB).
func TestDataModelQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := testdb.PGDriver(t)
	_, err := msgx.Migrate(ctx, store, relayclock.System{})
	require.NoError(t, err)
	mailbox := testdb.MariaDB(t)
	require.NoError(t, simulate.CreateMailbox(ctx, mailbox))

	var pg, my int
	for _, block := range sqlBlocks(t, "../../../docs/msgx/data-model.md") {
		for _, q := range statements(block) {
			if strings.Contains(q, "CMINMSGS") || strings.Contains(q, "COUTMSGS") {
				rows, err := mailbox.QueryContext(ctx, q)
				require.NoError(t, err, q)
				for rows.Next() {
				}
				require.NoError(t, rows.Err(), q)
				require.NoError(t, rows.Close())
				my++
				continue
			}
			rows, err := store.Pool().Query(ctx, q)
			require.NoError(t, err, q)
			rows.Close()
			require.NoError(t, rows.Err(), q)
			pg++
		}
	}
	require.GreaterOrEqual(t, pg, 15, "PostgreSQL queries found in the page")
	require.GreaterOrEqual(t, my, 2, "mailbox queries found in the page")
}

// TestMailboxDDLDoc keeps the mailbox DDL of docs/msgx/operations.md equal
// (comments and spacing aside) to what `relay msgx mailbox create` runs.
func TestMailboxDDLDoc(t *testing.T) {
	var doc []string
	for _, block := range sqlBlocks(t, "../../../docs/msgx/operations.md") {
		for _, s := range statements(block) {
			if strings.HasPrefix(s, "CREATE TABLE") {
				doc = append(doc, s)
			}
		}
	}
	code, err := os.ReadFile("simulate/mailbox.sql")
	require.NoError(t, err)
	var want []string
	for _, s := range statements(string(code)) {
		if strings.HasPrefix(s, "CREATE TABLE") {
			want = append(want, s)
		}
	}
	require.Len(t, want, 2)
	require.Equal(t, want, doc)
}
