// Package relayhttp serves relay's HTTP endpoints — the admin API, an app's
// intake endpoints, /metrics — with one set of safe defaults, so that every
// listener in the module (`relay serve`, `relay msgx run`, examples/orders)
// is hardened alike. Listen binds a Server; its Config documents every default.
//
// Every listener gets:
//
//   - timeouts on reading the header and the whole request, on writing the
//     answer and on idle keep-alive connections, a header size limit and a
//     limit on open connections, so a client trickling bytes cannot hold the
//     server's sockets for long;
//   - a body limit (http.MaxBytesReader) and a deadline on each request's
//     context;
//   - a loopback address when the host is left out (":9091" listens on
//     127.0.0.1:9091, never on every interface).
//
// A protected listener (Config.Public false) also:
//
//   - refuses to start on a non-loopback address unless clients must
//     authenticate: a bearer token (Config.Token, compared in constant time)
//     or mutual TLS (Config.TLS with verified client certificates);
//   - refuses a Host header that is not an IP address, "localhost" or one of
//     Config.Hosts with 421 (DNS rebinding: a page whose own name was made to
//     resolve to 127.0.0.1 sends that name);
//   - refuses a request without the token with 401;
//   - refuses cross-origin browser requests that change state with 403
//     (http.CrossOriginProtection).
//
// An endpoint that accepts a body states its media types with
// RequireContentType (415 otherwise); a browser cannot send application/json
// or application/xml across origins without a preflight. InternalError turns
// a store or system error into a generic answer with an error id, logging the
// detail (bounded) instead: raw database errors never reach a client.
//
// Error answers of this package are JSON objects {"error": "…"}, the shape of
// relayadmin's. The package imports only the standard library.
package relayhttp
