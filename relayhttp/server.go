package relayhttp

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Defaults of Config.
const (
	// ReadHeaderTimeoutDefault bounds reading a request's header.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// ReadTimeoutDefault bounds reading a whole request, body included.
	ReadTimeoutDefault = 30 * time.Second
	// RequestTimeoutDefault bounds each request's context.
	RequestTimeoutDefault = 30 * time.Second
	// WriteSlackDefault is what the default WriteTimeout adds to the
	// RequestTimeout: a handler whose context ended still has this long to
	// write its answer.
	WriteSlackDefault = 15 * time.Second
	// IdleTimeoutDefault bounds how long a keep-alive connection waits for
	// its next request.
	IdleTimeoutDefault = 60 * time.Second
	// MaxHeaderBytesDefault bounds a request's header.
	MaxHeaderBytesDefault = 16 << 10
	// MaxBodyBytesDefault bounds a request's body.
	MaxBodyBytesDefault = 1 << 20
	// MaxConnsDefault bounds the connections open at once.
	MaxConnsDefault = 64
)

// Config configures a Server. Only Addr and Handler are required.
type Config struct {
	// Name names the listener in errors and logs, e.g. "--admin-addr".
	// Default "http".
	Name string
	// Addr is the host:port to listen on. Required. An empty host (":9091")
	// means 127.0.0.1, never every interface: write 0.0.0.0:9091 or
	// [::]:9091 for that. Port 0 picks a free port (see Server.Addr).
	Addr string
	// Handler serves the requests. Required.
	Handler http.Handler
	// Public marks a listener of public, read-only data (/metrics,
	// /healthz): no Host, origin or token checks, and a non-loopback Addr is
	// allowed, with a warning in the log. Otherwise the listener is protected.
	Public bool
	// Token, when set, must come with every request of a protected listener
	// as "Authorization: Bearer <token>" (compared in constant time; 401
	// otherwise). A protected listener on a non-loopback address refuses to
	// start without a Token or mutual TLS.
	Token Token
	// HandlerAuthenticates, on a protected listener without a Token, says
	// that Handler authenticates every request that reads or changes
	// anything itself (per-user bearer tokens, say) and serves only static,
	// data-free content without it: a non-loopback Addr is then allowed, as
	// with a Token. The Host and cross-origin checks still apply.
	HandlerAuthenticates bool
	// TLS, when set, serves HTTPS with it (it needs a certificate). With
	// ClientAuth tls.RequireAndVerifyClientCert and ClientCAs set it is mutual
	// TLS, which authenticates clients as a Token does.
	TLS *tls.Config
	// Hosts lists the Host names a protected listener accepts besides IP
	// addresses and "localhost" (the port is ignored, case too). Another name
	// is refused with 421: DNS rebinding needs a name.
	Hosts []string
	// MaxBodyBytes bounds each request body: a handler reading past it gets
	// an *http.MaxBytesError. Default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// RequestTimeout bounds each request's context. Default
	// RequestTimeoutDefault.
	RequestTimeout time.Duration
	// ReadHeaderTimeout bounds reading the header. Default
	// ReadHeaderTimeoutDefault.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, from its first byte; a
	// client that has not sent its body by then is cut off. Default
	// ReadTimeoutDefault.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its header to the end of
	// the answer. Default RequestTimeout + WriteSlackDefault; it must exceed
	// RequestTimeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection. Default IdleTimeoutDefault.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header. Default MaxHeaderBytesDefault.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; further clients wait in
	// the kernel's accept queue until one closes. Default MaxConnsDefault.
	MaxConns int
	// Logger records the listener's start and warnings. Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns cfg with every zero field set to its default.
func (cfg Config) withDefaults() Config {
	cfg.Name = cmp.Or(cfg.Name, "http")
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, MaxBodyBytesDefault)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, RequestTimeoutDefault)
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, ReadTimeoutDefault)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, cfg.RequestTimeout+WriteSlackDefault)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, IdleTimeoutDefault)
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, MaxHeaderBytesDefault)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, MaxConnsDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// validate names the first bad field of a defaulted cfg.
func (cfg *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxBodyBytes", cfg.MaxBodyBytes}, {"RequestTimeout", int64(cfg.RequestTimeout)},
		{"ReadHeaderTimeout", int64(cfg.ReadHeaderTimeout)}, {"ReadTimeout", int64(cfg.ReadTimeout)},
		{"IdleTimeout", int64(cfg.IdleTimeout)}, {"MaxHeaderBytes", int64(cfg.MaxHeaderBytes)},
		{"MaxConns", int64(cfg.MaxConns)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s is negative", f.name)
		}
	}
	switch {
	case cfg.Addr == "":
		return errors.New("Config.Addr is empty")
	case cfg.Handler == nil:
		return errors.New("Config.Handler is nil")
	case cfg.WriteTimeout <= cfg.RequestTimeout:
		return fmt.Errorf("Config.WriteTimeout %s must exceed Config.RequestTimeout %s, or a handler could not answer "+
			"after its context ended", cfg.WriteTimeout, cfg.RequestTimeout)
	case cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil:
		return errors.New("Config.TLS has no certificate")
	}
	return nil
}

// mutualTLS reports whether c makes every client present a verified
// certificate.
func mutualTLS(c *tls.Config) bool {
	return c != nil && c.ClientAuth == tls.RequireAndVerifyClientCert && c.ClientCAs != nil
}

// Server is one listener with its http.Server. Serve runs it; Shutdown stops
// it. Its methods are safe for concurrent use.
type Server struct {
	name string
	ln   net.Listener
	srv  *http.Server
	tls  bool
}

// Listen checks cfg, binds its address and returns the Server; nothing is
// served until Serve. A protected listener bound to a non-loopback address
// without a Token or mutual TLS is refused with an error that says what to
// set; a public one on such an address is logged as a warning.
func Listen(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("relayhttp: %s: %w", cfg.Name, err)
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("relayhttp: %s %q: %w", cfg.Name, cfg.Addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("relayhttp: %s: %w", cfg.Name, err)
	}
	// Judge the address actually bound: a name such as "localhost" or a
	// host name resolves to something, and only a loopback IP is safe.
	bound := ln.Addr().(*net.TCPAddr)
	if !bound.IP.IsLoopback() {
		switch {
		case cfg.Public:
			cfg.Logger.Warn("relayhttp: listening on a non-loopback address without authentication; "+
				"every host that can reach it can read what it serves", "listener", cfg.Name, "addr", bound.String())
		case len(cfg.Token) == 0 && !mutualTLS(cfg.TLS) && !cfg.HandlerAuthenticates:
			_ = ln.Close()
			return nil, fmt.Errorf("relayhttp: %s %s is not a loopback address and its clients would not "+
				"authenticate: configure a token (file) or mutual TLS (client certificates), or listen on 127.0.0.1",
				cfg.Name, cfg.Addr)
		}
	}
	s := &Server{name: cfg.Name, ln: limitListener(ln, cfg.MaxConns), tls: cfg.TLS != nil}
	s.srv = &http.Server{
		Handler:           handler(&cfg),
		TLSConfig:         cfg.TLS,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Addr is the bound address (with the port chosen for port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the base URL of the server: http://ADDR or https://ADDR.
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.Addr().String()
	}
	return "http://" + s.Addr().String()
}

// Serve serves until Shutdown (then it returns nil) or the listener fails.
func (s *Server) Serve() error {
	var err error
	if s.tls {
		err = s.srv.ServeTLS(s.ln, "", "")
	} else {
		err = s.srv.Serve(s.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("relayhttp: %s: %w", s.name, err)
	}
	return nil
}

// Shutdown stops accepting, waits for the requests in flight until ctx ends,
// then closes what is left. A Server that never served is closed too.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if cerr := s.ln.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	return err
}
