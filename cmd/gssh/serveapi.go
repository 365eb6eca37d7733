package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gssh/gssh/dashboard"
	"github.com/gssh/gssh/httpapi"
	"github.com/gssh/gssh/metrics"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
)

// apiAddr is --listen as an address to listen on: a port alone
// (8765) is loopback's, 127.0.0.1:8765; a host given is that host's
// (:8765 every address).
func apiAddr(listen string) (string, error) {
	if n, err := strconv.Atoi(listen); err == nil {
		if n < 1 || n > 65535 {
			return "", fmt.Errorf("--listen %s: give a port from 1 to 65535, or HOST:PORT", listen)
		}
		return net.JoinHostPort("127.0.0.1", listen), nil
	}
	if _, port, err := net.SplitHostPort(listen); err != nil || port == "" {
		return "", fmt.Errorf("--listen %q: give a port (8765: loopback), or HOST:PORT (0.0.0.0:8765 for every address)", listen)
	}
	return listen, nil
}

// checkAPIFlags refuses, before gssh serve starts anything, a --listen
// that names no address and TLS files that cannot be read (or go without
// --listen); the TLS read is kept in opts.tls for startAPI.
func checkAPIFlags(opts *serveOptions) error {
	if opts.listen == "" {
		if opts.tlsCert != "" || opts.tlsKey != "" || opts.publicMetrics {
			return errors.New("--tls-cert, --tls-key and --public-metrics go with --listen, which serves the HTTP API")
		}
		return nil
	}
	if _, err := apiAddr(opts.listen); err != nil {
		return err
	}
	var err error
	opts.tls, err = tlsConfig(opts)
	return err
}

// tlsConfig is the TLS of --tls-cert and --tls-key (nil: none).
func tlsConfig(opts *serveOptions) (*tls.Config, error) {
	switch {
	case (opts.tlsCert == "") != (opts.tlsKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	case opts.tlsCert == "":
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(opts.tlsCert, opts.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", opts.tlsCert, opts.tlsKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// startAPI serves the HTTP API on opts.listen (TLS with --tls-cert and
// --tls-key), its /metrics mx's, until stop is called, which lets the requests in flight end
// for up to 5 s. Errors (an address in use, TLS files unreadable) name
// what to fix: gssh serve does not start then.
func startAPI(opts *serveOptions, l *service.Local, cur *atomic.Pointer[service.Local], passes service.Passes, lg *serveLog, mx *metrics.Metrics, rpc *serve.Server) (stop func(), err error) {
	if err := l.CheckAPI(); err != nil {
		return nil, err
	}
	addr, err := apiAddr(opts.listen)
	if err != nil {
		return nil, err
	}
	cfg := opts.tls // checkAPIFlags read it
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", opts.listen, err)
	}
	dash := dashboard.Handler(dashboard.Options{
		TokenUser: func(ctx context.Context, tok string) (string, error) { return cur.Load().TokenUser(ctx, tok) },
		Admin:     func(user string) bool { return cur.Load().As(user, nil).MayActOnAll() },
	})
	api := httpapi.New(httpapi.Options{Current: cur.Load, Passes: passes, Metrics: mx.Handler(), MetricsOpen: opts.publicMetrics, Observe: mx.Request, RPC: rpc, Dashboard: dash})
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second, // a request's body: at most httpapi.MaxBody
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         cfg,
		ErrorLog:          log.New(io.Discard, "", 0), // TLS handshakes of scanners and the like: not the lab's log
	}
	scheme := "http"
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
		scheme = "https"
	}
	go srv.Serve(ln)
	lg.info(fmt.Sprintf("HTTP API on %s://%s (docs/api.md); the dashboard at %s://%s/", scheme, ln.Addr(), scheme, ln.Addr()))
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); cfg == nil && !net.ParseIP(host).IsLoopback() {
		lg.warn(fmt.Sprintf("the HTTP API on %s is not loopback and has no TLS: tokens cross the network in the clear (give --tls-cert and --tls-key)", ln.Addr()))
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close() // the streams still open: cut
		}
	}, nil
}
