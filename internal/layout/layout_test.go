package layout_test

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/layout"
)

// moduleGraph reads the non-test imports of every package of the module (a
// folder with its own go.mod is another module and left out), and the text of
// its non-test Go files by module-relative path.
func moduleGraph(t *testing.T) (layout.Graph, map[string][]string, map[string]string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	g := layout.Graph{}
	third := map[string][]string{}
	src := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		g[rel] = []string{}
		for _, f := range pkg.GoFiles {
			text, err := os.ReadFile(filepath.Join(path, f))
			if err != nil {
				return err
			}
			src[strings.TrimPrefix(rel+"/"+f, "/")] = string(text)
		}
		for _, imp := range pkg.Imports {
			switch {
			case imp == layout.Module:
				g[rel] = append(g[rel], "")
			case strings.HasPrefix(imp, layout.Module+"/"):
				g[rel] = append(g[rel], strings.TrimPrefix(imp, layout.Module+"/"))
			case strings.Contains(strings.Split(imp, "/")[0], "."):
				third[rel] = append(third[rel], imp)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return g, third, src
}

// TestModuleKeepsImportRules holds the layout on the real module.
func TestModuleKeepsImportRules(t *testing.T) {
	g, third, src := moduleGraph(t)
	// The walk must have found the packages the rules are about, or the test
	// would pass on an empty graph.
	for _, p := range []string{"", "relaytype", "relaydriver/relaypgx", "relaysink/relaykafka", "internal/app/msgx", "internal/app/msgx/flight", "internal/dispatch"} {
		require.Contains(t, g, p, "package %q not found by the walk", p)
	}
	require.Empty(t, layout.Check(g, third))
	require.Contains(t, src, "relayhttp/server.go")
	require.Empty(t, layout.CheckHTTPServers(src))
}

// TestCheckHTTPServers proves the rule can fail.
func TestCheckHTTPServers(t *testing.T) {
	got := layout.CheckHTTPServers(map[string]string{
		"relayhttp/server.go":           "srv := &http.Server{}",
		"internal/cli/serve.go":         "srv := &http.Server{Handler: mux}",
		"internal/app/sms/gateway.go":   "return http.ListenAndServe(addr, mux)",
		"examples/orders/main.go":       "http.Serve(ln, mux)",
		"internal/cli/serve_test.go":    "httptest.NewServer(h); &http.Server{}",
		"internal/app/msgx/service.go":  "s.Serve(ctx); relayhttp.Listen(cfg)",
		"internal/app/shipsync/x.go":    "var _ *http.Server",
		"internal/app/shipsync/tls.go":  "http.ServeTLS(ln, h, c, k)",
		"internal/app/shipsync/mine.go": "myhttp.Server{}",
	})
	require.Equal(t, []string{
		"examples/orders/main.go uses http.Serve(: an HTTP server is built with relayhttp.Listen",
		"internal/app/shipsync/tls.go uses http.ServeTLS(: an HTTP server is built with relayhttp.Listen",
		"internal/app/sms/gateway.go uses http.ListenAndServe(: an HTTP server is built with relayhttp.Listen",
		"internal/cli/serve.go uses http.Server: an HTTP server is built with relayhttp.Listen",
	}, got)
}

// TestCheckReportsEveryRule proves each rule can fail: a graph breaking all of
// them gets one line per broken import.
func TestCheckReportsEveryRule(t *testing.T) {
	g := layout.Graph{
		"":                            {"internal/app/msgx"},
		"relaytype":                   {"relayclock"},
		"relaydriver/relaypgx":        {""},
		"relaysink/relayredis":        {"internal/app/msgx/flight"},
		"internal/app/msgx/sisxml":    {"", "relaytype"},
		"internal/app/msgx/flight":    {"internal/app/msgx/sisxml", "relaydriver"},
		"internal/app/sms":            {"internal/app/msgx/flight"},
		"bench":                       {"internal/app/msgx"},
		"internal/crash":              {"internal/cli"},
		"internal/cli":                {"internal/app/msgx"},
		"internal/app/msgx/msgxcrash": {"internal/app/msgx", "internal/crash"},
		"examples/orders":             {"", "relaysink/relayredis", "internal/watermark"},
		"internal/dispatch":           {"", "relayservice", "internal/service"},
	}
	got := layout.Check(g, map[string][]string{"relaytype": {"github.com/jackc/pgx/v5"}})
	require.Equal(t, []string{
		"bench imports internal/app/msgx: the engine, its tools and benches never import an app",
		"examples/orders imports internal/watermark: an example uses the public API only",
		"github.com/relayhq/relay (root) imports internal/app/msgx: the engine, its tools and benches never import an app",
		"internal/app/msgx/flight imports relaydriver: a codec or domain package imports no engine part",
		"internal/app/msgx/sisxml imports github.com/relayhq/relay (root): a codec or domain package imports no engine part",
		"internal/app/sms imports internal/app/msgx/flight: an app never imports another app",
		"internal/crash imports internal/cli: only cmd/relay builds the command tree",
		"internal/dispatch imports github.com/relayhq/relay (root): an engine internal never imports the public API it implements",
		"internal/dispatch imports relayservice: an engine internal never imports the public API it implements",
		"relaydriver/relaypgx imports github.com/relayhq/relay (root): a store driver never imports the engine or an app",
		"relaysink/relayredis imports internal/app/msgx/flight: a sink never imports the engine or an app",
		"relaytype imports github.com/jackc/pgx/v5: a leaf package imports only the standard library",
		"relaytype imports relayclock: a leaf package imports only the standard library",
	}, got)
}
