package relayhttp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
)

// handler wraps cfg.Handler in the listener's protections, outermost first:
// the request's body limit and deadline; then, on a protected listener, the
// Host check (421), the token (401) and the cross-origin check (403).
func handler(cfg *Config) http.Handler {
	h := cfg.Handler
	if !cfg.Public {
		cop := http.NewCrossOriginProtection()
		cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			WriteError(w, http.StatusForbidden, "cross-origin request refused")
		}))
		h = cop.Handler(h)
		if len(cfg.Token) > 0 {
			h = requireToken(cfg.Token, h)
		}
		h = checkHost(cfg.Hosts, h)
	}
	maxBody, timeout := cfg.MaxBodyBytes, cfg.RequestTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// checkHost refuses a request whose Host is a name other than "localhost"
// and hosts with 421 Misdirected Request. An IP address is always accepted:
// a browser sends one only to the server at that address, while DNS
// rebinding makes it send the attacker's name to ours.
func checkHost(hosts []string, next http.Handler) http.Handler {
	allowed := []string{"localhost"}
	for _, h := range hosts {
		allowed = append(allowed, strings.ToLower(hostOnly(h)))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(hostOnly(r.Host))
		if net.ParseIP(host) == nil && !slices.Contains(allowed, host) {
			WriteError(w, http.StatusMisdirectedRequest,
				"Host "+quoteBounded(host)+" is not served here (allowed: an IP address, localhost or a configured host)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostOnly strips the port (and an IPv6 address's brackets) from host[:port].
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// quoteBounded quotes s, cut to 64 bytes: a client's header is echoed
// without letting it fill the answer.
func quoteBounded(s string) string {
	return `"` + strings.ToValidUTF8(Bound(s, 64), "?") + `"`
}

// contentTypeMethods are the methods whose body RequireContentType checks.
var contentTypeMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// RequireContentType returns a middleware that refuses a POST, PUT, PATCH or
// DELETE request whose Content-Type media type is not one of types with 415
// Unsupported Media Type (parameters such as charset are ignored). Other
// methods pass. An endpoint that takes JSON or XML this way cannot be driven
// by a cross-origin HTML form or a "simple" fetch: those send only
// text/plain, application/x-www-form-urlencoded or multipart/form-data.
func RequireContentType(types ...string) func(http.Handler) http.Handler {
	want := strings.Join(types, " or ")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slices.Contains(contentTypeMethods, r.Method) {
				mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
				if !slices.Contains(types, strings.ToLower(strings.TrimSpace(mt))) {
					WriteError(w, http.StatusUnsupportedMediaType, "Content-Type must be "+want)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// WriteError writes {"error": msg} with status as JSON, not to be cached.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
