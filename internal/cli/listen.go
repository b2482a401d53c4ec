package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayhttp"
)

// httpStopTimeout bounds the drain of the HTTP servers when a command stops.
const httpStopTimeout = 5 * time.Second

// listenFlags are the flags of one protected HTTP listener (relayhttp): for
// prefix "admin" they are --admin-addr, --admin-token-file, --admin-hosts,
// --admin-tls-cert, --admin-tls-key and --admin-client-ca.
type listenFlags struct {
	prefix                                            string
	addr, tokenFile, hosts, tlsCert, tlsKey, clientCA string
}

// addListenFlags registers the flags of the listener that serves what.
func addListenFlags(fs *flag.FlagSet, prefix, what string) *listenFlags {
	f := &listenFlags{prefix: prefix}
	p := "--" + prefix
	fs.StringVar(&f.addr, prefix+"-addr", "", fmt.Sprintf("serve %s on this address (empty: off); :PORT "+
		"means 127.0.0.1:PORT, and a non-loopback address needs %s-token-file or %s-client-ca", what, p, p))
	fs.StringVar(&f.tokenFile, prefix+"-token-file", "", "file holding the bearer token every request to "+p+
		"-addr must carry (16 to 1024 visible ASCII characters, e.g. from openssl rand -hex 32; mode 0600)")
	fs.StringVar(&f.hosts, prefix+"-hosts", "", "comma-separated host names clients of "+p+
		"-addr may use (Host header) besides IP addresses and localhost")
	fs.StringVar(&f.tlsCert, prefix+"-tls-cert", "", "serve "+p+"-addr over HTTPS with this PEM certificate (with "+p+"-tls-key)")
	fs.StringVar(&f.tlsKey, prefix+"-tls-key", "", "PEM private key of "+p+"-tls-cert")
	fs.StringVar(&f.clientCA, prefix+"-client-ca", "", "PEM CA certificates: "+p+
		"-addr requires client certificates they signed (mutual TLS; needs "+p+"-tls-cert)")
	return f
}

// addServiceFlags registers the listeners every service command has: the
// public --metrics-addr and the protected admin API (--admin-…).
func addServiceFlags(fs *flag.FlagSet) (metricsAddr *string, admin *listenFlags) {
	metricsAddr = fs.String("metrics-addr", "", "serve /metrics and /healthz on this address (empty: off); public and "+
		"read-only: :PORT means 127.0.0.1:PORT, and a non-loopback address is logged as a warning")
	return metricsAddr, addListenFlags(fs, "admin", "the admin API (/admin/…, for relay admin --addr)")
}

// config returns the relayhttp configuration of the listener serving h,
// reading the token and TLS files; ok is false when the listener is off.
func (f *listenFlags) config(h http.Handler, log *slog.Logger) (cfg relayhttp.Config, ok bool, err error) {
	if f.addr == "" {
		if f.tokenFile != "" || f.tlsCert != "" || f.clientCA != "" {
			return cfg, false, fmt.Errorf("--%s-token-file and the TLS flags need --%s-addr", f.prefix, f.prefix)
		}
		return cfg, false, nil
	}
	cfg = relayhttp.Config{Name: "--" + f.prefix + "-addr", Addr: f.addr, Handler: h, Hosts: splitList(f.hosts), Logger: log}
	if f.tokenFile != "" {
		if cfg.Token, err = readTokenFile("--"+f.prefix+"-token-file", f.tokenFile, log); err != nil {
			return cfg, false, err
		}
	}
	cfg.TLS, err = serverTLS("--"+f.prefix, f.tlsCert, f.tlsKey, f.clientCA)
	return cfg, err == nil, err
}

// metricsConfig is the public listener of /metrics and /healthz on addr
// (ok false when addr is empty).
func metricsConfig(addr string, reg *prometheus.Registry, log *slog.Logger) (relayhttp.Config, bool) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return relayhttp.Config{Name: "--metrics-addr", Addr: addr, Handler: mux, Public: true, Logger: log}, addr != ""
}

// startHTTP listens on every cfgs and serves them in the background; stop
// drains them within httpStopTimeout. When one cannot listen, those already
// started are stopped and the error returned.
func startHTTP(log *slog.Logger, cfgs ...relayhttp.Config) (stop func(), err error) {
	var servers []*relayhttp.Server
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(ctx)
		}
	}
	for _, cfg := range cfgs {
		s, err := relayhttp.Listen(cfg)
		if err != nil {
			stop()
			return nil, err
		}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(); err != nil {
				log.Error("http: serving stopped", "listener", cfg.Name, "error", err)
			}
		}()
		log.Info("http: listening", "listener", cfg.Name, "url", s.URL())
	}
	return stop, nil
}

// readTokenFile reads a bearer token file (flagName names it in errors,
// which never quote its content). A file other users may read is accepted
// with a warning on log (nil: none): anyone who reads it has the token.
func readTokenFile(flagName, path string, log *slog.Logger) (relayhttp.Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 && log != nil {
		log.Warn("token file is readable by other users; chmod 600 it", "flag", flagName, "path", path,
			"mode", st.Mode().Perm().String())
	}
	b, err := io.ReadAll(io.LimitReader(f, relayhttp.TokenMaxLen+64))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	tok, err := relayhttp.ParseToken(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	return tok, nil
}

// serverTLS builds the TLS configuration of a listener from its flags (nil
// without a certificate): clientCA makes it mutual TLS.
func serverTLS(flagPrefix, certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && clientCA == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%s-tls-cert and %s-tls-key go together (and %s-client-ca needs them)",
			flagPrefix, flagPrefix, flagPrefix)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s-tls-cert: %w", flagPrefix, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		if c.ClientCAs, err = certPool(clientCA); err != nil {
			return nil, fmt.Errorf("%s-client-ca: %w", flagPrefix, err)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// certPool reads the PEM certificates of path.
func certPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + ": no PEM certificate")
	}
	return pool, nil
}

// startListeners starts the HTTP listeners every service command has: the
// public metrics one on metricsAddr and the admin API of deps on the
// listener of admin, each when its address is set, plus extra (an app's own
// endpoints). stop drains them all.
func startListeners(log *slog.Logger, metricsAddr string, reg *prometheus.Registry, admin *listenFlags,
	deps relayadmin.Deps, extra ...relayhttp.Config) (stop func(), err error) {
	var cfgs []relayhttp.Config
	if cfg, ok := metricsConfig(metricsAddr, reg, log); ok {
		cfgs = append(cfgs, cfg)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", relayadmin.Handler(deps))
	cfg, ok, err := admin.config(mux, log)
	if err != nil {
		return nil, err
	}
	if ok {
		cfgs = append(cfgs, cfg)
	}
	return startHTTP(log, append(cfgs, extra...)...)
}
