package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/console"
	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relayhttp"
)

// chromiumPath finds Debian's chromium (or $CHROMIUM); the test fails
// without it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("chromium is required for the console's end-to-end test and was not found: install it with " +
		"`apt-get install -y chromium` (or set CHROMIUM to its path)")
	return ""
}

// TestConsoleEndToEnd runs the two-way demo world (ship and shore edited
// at once under a flapping link, conflicts arbitrated), pauses it with
// conflicts waiting for an operator, and drives the console in headless
// Chromium: every page is visited with the world's real data and
// screenshotted, one case is decided through the conflict centre's form,
// and the audit page shows that decision. The world then finishes — the
// operator deciding the rest — and both databases must still converge.
func TestConsoleEndToEnd(t *testing.T) {
	browser := chromiumPath(t)
	shots := t.ArtifactDir()
	t.Logf("screenshots: %s (kept with go test -artifacts)", shots)
	users, err := console.ParseUsers([]byte(usersFile))
	require.NoError(t, err)

	var progress bytes.Buffer
	var decided string
	serve := func(s converge.Shore) (base string, stop func(), err error) {
		target, err := apply.OpenTarget(s.TargetDSN)
		if err != nil {
			return "", nil, err
		}
		c, err := console.New(console.Config{Pool: s.Pool, Target: target, ShoreNode: s.Node, Users: users,
			Clock: relayclock.System{}})
		if err != nil {
			_ = target.Close()
			return "", nil, err
		}
		srv, err := relayhttp.Listen(relayhttp.Config{Name: "console", Addr: "127.0.0.1:0", Handler: c.Handler()})
		if err != nil {
			_ = target.Close()
			return "", nil, err
		}
		go func() { _ = srv.Serve() }()
		return srv.URL(), func() { _ = srv.Shutdown(context.Background()); _ = target.Close() }, nil
	}
	// While the edits go on, once the ship has reported a backlog: its
	// node page with the backlog and the ETA's inputs (runs off the test's
	// goroutine, so it returns errors instead of failing the test).
	var midway bool
	midDir := t.TempDir()
	sending := func(ctx context.Context, s converge.Shore) error {
		base, stop, err := serve(s)
		if err != nil {
			return err
		}
		defer stop()
		bctx, cancel := newBrowser(ctx, browser, midDir)
		defer cancel()
		err = chromedp.Do(bctx, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#login-submit")),
			chromedp.WaitVisible(chromedp.CSS("#nodes tbody a")), chromedp.Click(chromedp.CSS("#nodes tbody a")),
			chromedp.WaitVisible(chromedp.CSS("#eta-inputs")))
		if err != nil {
			return fmt.Errorf("console while sending: %w", err)
		}
		eta, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#eta-inputs")))
		if err != nil {
			return fmt.Errorf("console while sending: %w", err)
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			return fmt.Errorf("console while sending: %w", err)
		}
		if !strings.Contains(eta, "remaining") {
			return fmt.Errorf("console while sending: the ETA's inputs are missing: %q", relayhttp.Bound(eta, 300))
		}
		midway = true
		return os.WriteFile(filepath.Join(shots, "00-node-detail-while-sending.png"), png, 0o644)
	}
	pause := func(ctx context.Context, s converge.Shore) error {
		base, stop, err := serve(s)
		if err != nil {
			return err
		}
		defer stop()
		id, version := decidableCase(t, base)
		stale(t, base, id)
		decided = id
		browse(t, ctx, browser, shots, base, id, version)
		return nil
	}
	res, err := converge.Run(t.Context(), converge.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Rows: 20, Edits: 80, BadTimes: 0.9, Flaps: true, Seed: 11, Progress: &progress, Pause: pause,
		Midway: sending})
	require.NoError(t, err, progress.String())
	var out bytes.Buffer
	res.Write(&out)
	t.Logf("%s\n%s", progress.String(), out.String())
	require.NotEmpty(t, decided, "the console decided a case")
	t.Logf("the node page was also seen while sending: %v", midway)
	require.True(t, res.OK(), "both sides converge after the console's decision:\n%s", out.String())
}

// apiGet reads a JSON answer of the API as the operator.
func apiGet(t *testing.T, base, path string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1"+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, path)
	require.NoError(t, json.NewDecoder(res.Body).Decode(v))
}

// decidableCase returns a PENDING_MANUAL case whose shore row is still the
// one in its evidence (an operator's decision would be accepted), and its
// version.
func decidableCase(t *testing.T, base string) (id, version string) {
	t.Helper()
	var list struct {
		Conflicts []struct{ ID string }
	}
	apiGet(t, base, "/conflicts?state="+arbiter.StatePending, &list)
	require.NotEmpty(t, list.Conflicts, "the world left cases to an operator")
	// Prefer a case with a row on both sides: its diff shows values
	// against values.
	fallback := ""
	var fallbackVersion string
	for _, c := range list.Conflicts {
		var d struct {
			Version    string
			ShoreMoved bool `json:"shore_moved"`
			Node       struct{ Exists bool }
			Shore      struct{ Exists bool }
			Diff       []struct{ Changed bool }
		}
		apiGet(t, base, "/conflicts/"+c.ID, &d)
		if d.ShoreMoved || len(d.Diff) == 0 {
			continue
		}
		changed := 0
		for _, x := range d.Diff {
			if x.Changed {
				changed++
			}
		}
		require.Positive(t, changed, "the evidence diff marks the columns the two versions differ in")
		if d.Node.Exists && d.Shore.Exists {
			t.Logf("case %s: a row on both sides (%d pending)", c.ID, len(list.Conflicts))
			return c.ID, d.Version
		}
		if fallback == "" {
			fallback, fallbackVersion = c.ID, d.Version
		}
	}
	if fallback != "" {
		return fallback, fallbackVersion
	}
	t.Fatalf("no pending case is decidable (%d pending, every shore row moved since its evidence)", len(list.Conflicts))
	return "", ""
}

// stale: a decision sent with a version the case no longer has is 409 and
// decides nothing.
func stale(t *testing.T, base, id string) {
	t.Helper()
	body := `{"choice":"SHORE","reason":"from an old page","seen_version":"1.0"}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/api/v1/conflicts/"+id+"/decision", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "stale-"+id)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusConflict, res.StatusCode)
}

// browse drives the console in Chromium.
func browse(t *testing.T, parent context.Context, browser, shots, base, id, version string) {
	t.Helper()
	ctx, cancel := newBrowser(parent, browser, t.TempDir())
	defer cancel()

	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("console: %s: %v\npage: %s", what, err, relayhttp.Bound(text, 2000))
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err, name)
		require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "%s is a PNG", name)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}

	step("sign in", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#nodes")))
	require.Contains(t, text("#whoami"), "ada (admin)")
	require.Contains(t, text("#nodes"), "ship", "the demo's node is listed")
	shot("01-node-overview")

	step("node detail", chromedp.Click(chromedp.CSS("#nodes tbody a")), chromedp.WaitVisible(chromedp.CSS("#node-detail")))
	require.Contains(t, text("#node-detail"), "events received")
	require.NotEmpty(t, text("#eta-inputs"), "the ETA or why there is none")
	shot("02-node-detail")

	step("rules", chromedp.Click(chromedp.CSS("#nav-rules")), chromedp.WaitVisible(chromedp.CSS("#rules")))
	require.Contains(t, text("#rules"), "LAST_WRITER_WINS")
	require.NotEmpty(t, text("#releases"))
	shot("03-rules")

	step("conflict centre", chromedp.Click(chromedp.CSS("#nav-conflicts")), chromedp.WaitVisible(chromedp.CSS("#conflicts")))
	require.Contains(t, text("#conflicts"), "PENDING_MANUAL")
	shot("04-conflict-centre")

	step("conflict detail", chromedp.Navigate(base+"/console/#/conflict/"+id), chromedp.WaitVisible(chromedp.CSS("#diff")),
		chromedp.WaitVisible(chromedp.CSS("#decide-form")))
	require.Contains(t, text("#case-case"), version, "the page shows the case version it will send")
	rows, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#diff tr.changed")))
	require.NoError(t, err)
	require.NotEmpty(t, rows, "changed columns are highlighted")
	shot("05-conflict-evidence-diff")

	const reason = "console e2e: the shore's figures were checked on paper"
	step("manual decision", chromedp.SetValue(chromedp.CSS("#decide-choice"), "SHORE"),
		chromedp.SendKeys(chromedp.CSS("#decide-reason"), reason), chromedp.Click(chromedp.CSS("#decide-submit")),
		chromedp.WaitVisible(chromedp.CSS("#decide-result.ok")))
	require.Contains(t, text("#decide-result"), "Decided: SHORE")
	shot("06-conflict-decided")

	step("backlog", chromedp.Click(chromedp.CSS("#nav-backlog")), chromedp.WaitVisible(chromedp.CSS("#backlogs")))
	shot("07-backlog-disposal")

	step("audit search", chromedp.Click(chromedp.CSS("#nav-audit")), chromedp.WaitVisible(chromedp.CSS("#audit-form")),
		chromedp.SendKeys(chromedp.CSS("#audit-object_id"), id), chromedp.Click(chromedp.CSS("#audit-search")),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-action="conflict.decided"]`)))
	row := text(`#audit tr[data-action="conflict.decided"]`)
	require.Contains(t, row, "ada", "the audit names the console's user")
	require.Contains(t, row, reason)
	require.Contains(t, row, arbiter.StatePending, "before: the case was waiting")
	shot("08-audit-search")
	t.Logf("console: 8 pages visited, case %s decided through the form", id)
}

// newBrowser starts headless Chromium at path with a fresh profile in dir
// (the flags keep it off this machine's closed network) and a context for
// its steps, bounded to 90 s.
func newBrowser(parent context.Context, path, dir string) (context.Context, context.CancelFunc) {
	actx, cancelAlloc := chromedp.NewExecAllocator(parent,
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(dir), chromedp.WindowSize(1400, 1000))
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}
