// Package layout states the module's import rules and checks an import graph
// against them. Its test holds the rules on the real module: the engine never
// imports an app, drivers and sinks never import the engine, codecs and domain
// packages import no engine part, the engine's internal services never import
// the public API they implement, apps never import each other, examples
// use the public API only; and every HTTP server is built by relayhttp
// (CheckHTTPServers). A new rule goes
// here, beside the others, so a reader finds all of them in one place. Only
// non-test imports count: a test may use internal helpers (test databases,
// the crash harness).
package layout

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Module is the module path every rule is written against.
const Module = "github.com/relayhq/relay"

// Graph maps a package path (relative to Module, "" for the root package) to
// the module packages it imports (relative too). Standard-library and
// third-party imports are left out, except where a rule needs them (see
// StdlibOnly).
type Graph map[string][]string

// StdlibOnly lists packages that may import nothing outside the standard
// library: the leaf types everything else shares, and the HTTP server every
// listener of the module uses (relayhttp), so that any package may use it.
var StdlibOnly = []string{"relaytype", "relayhttp"}

// Pure lists codec and domain packages: they turn bytes into values and
// decide, and must not reach the engine, a store or a sink. They may import
// relaytype (error classes) and each other.
var Pure = []string{
	"internal/app/msgx/sisxml",
	"internal/app/msgx/flight",
	"internal/app/sms/cmpp",
	"internal/app/sms/rules",
	"internal/app/shipsync/shipsyncpb",
	"internal/app/shipsync/wire",
}

// EngineInternal lists the internal packages that implement the engine's
// long-running services behind the root's thin wrappers (relay.Dispatcher,
// relay.AckWriter, relay.Archiver, relay.Retention). The root imports them;
// they never import the root or the assembly above it (relayservice,
// relayadmin): types they need are leaf types or plain values.
var EngineInternal = []string{
	"internal/service",
	"internal/backoff",
	"internal/dispatch",
	"internal/ack",
	"internal/maintenance",
}

// Check returns one line per broken rule, sorted; nil when the graph keeps
// them all. thirdParty lists, per package, the imports that are neither the
// standard library nor this module (only StdlibOnly packages are checked
// against it).
func Check(g Graph, thirdParty map[string][]string) []string {
	var bad []string
	report := func(from, to, rule string) {
		bad = append(bad, fmt.Sprintf("%s imports %s: %s", show(from), show(to), rule))
	}
	for from, imports := range g {
		fromApp := appOf(from)
		for _, to := range imports {
			toApp := appOf(to)
			switch {
			case slices.Contains(StdlibOnly, from):
				report(from, to, "a leaf package imports only the standard library")
			case under(from, "relaydriver") && (to == "" || toApp != ""):
				report(from, to, "a store driver never imports the engine or an app")
			case under(from, "relaysink") && (to == "" || toApp != ""):
				report(from, to, "a sink never imports the engine or an app")
			case slices.Contains(Pure, from) && !slices.Contains(Pure, to) && to != "relaytype":
				report(from, to, "a codec or domain package imports no engine part")
			case slices.Contains(EngineInternal, from) && (to == "" || under(to, "relayservice") || under(to, "relayadmin")):
				report(from, to, "an engine internal never imports the public API it implements")
			case toApp != "" && fromApp == "" && !under(from, "internal/cli") && !under(from, "cmd"):
				report(from, to, "the engine, its tools and benches never import an app")
			case toApp != "" && fromApp != "" && toApp != fromApp:
				report(from, to, "an app never imports another app")
			case under(from, "examples") && under(to, "internal"):
				report(from, to, "an example uses the public API only")
			case under(to, "internal/cli") && !under(from, "cmd"):
				report(from, to, "only cmd/relay builds the command tree")
			}
		}
	}
	for _, p := range StdlibOnly {
		for _, imp := range thirdParty[p] {
			report(p, imp, "a leaf package imports only the standard library")
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// appOf returns the app a package belongs to ("msgx" for
// internal/app/msgx/flight), or "" outside internal/app.
func appOf(p string) string {
	rest, ok := strings.CutPrefix(p, "internal/app/")
	if !ok {
		return ""
	}
	app, _, _ := strings.Cut(rest, "/")
	return app
}

// under reports whether p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func show(p string) string {
	if p == "" {
		return Module + " (root)"
	}
	return p
}

// HTTPServerPackage is the one package that builds HTTP servers: every
// listener of the module goes through it, so each one gets its timeouts,
// limits and Host, origin and token checks (apps to come included).
const HTTPServerPackage = "relayhttp"

// httpServerUse matches code that runs an HTTP server by itself.
var httpServerUse = regexp.MustCompile(`\bhttp\.Server\{|\bhttp\.ListenAndServe(TLS)?\(|\bhttp\.Serve(TLS)?\(`)

// CheckHTTPServers returns one line per non-test Go file outside
// HTTPServerPackage that builds an http.Server or calls http.ListenAndServe
// or http.Serve, sorted; src maps a file's module-relative path to its text.
func CheckHTTPServers(src map[string]string) []string {
	var bad []string
	for path, text := range src {
		if under(path, HTTPServerPackage) || strings.HasSuffix(path, "_test.go") {
			continue
		}
		if m := httpServerUse.FindString(text); m != "" {
			bad = append(bad, fmt.Sprintf("%s uses %s: an HTTP server is built with relayhttp.Listen", path,
				strings.TrimSuffix(m, "{")))
		}
	}
	slices.Sort(bad)
	return bad
}
