// Package sdk serves a Sluice sink from its own process: a plugin author implements the same
// small interface as an in-process sink (sinks.Sink, optionally sinks.Maintainer) and calls
// Serve, which speaks the plugin protocol (sinks/plugin/proto/sluice/plugin/v1) to the workers:
// the handshake with the plugin's capabilities, the Arrow IPC stream of each batch decoded back
// into a sinks.Batch, errors classified as sinks.Poison or transient carried to the worker, TLS
// and a bearer token. docs/plugins.md is the guide.
package sdk

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicecdc/sluice/sinks"
	pluginv1 "github.com/sluicecdc/sluice/sinks/plugin/proto/sluice/plugin/v1"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// Address is the host:port to listen on (127.0.0.1:0 picks a free port; Ready tells which).
	Address string
	// Listener, when set, is used instead of listening on Address. Serve closes it.
	Listener net.Listener

	// TLSCertFile and TLSKeyFile are the plugin's PEM certificate and key: set both to serve
	// TLS. TLSClientCAFile additionally requires every worker to present a client certificate
	// signed by one of its CAs (mutual TLS).
	TLSCertFile, TLSKeyFile, TLSClientCAFile string

	// Token, when set, is the bearer token every call must carry (the worker's
	// sink.plugin.token). TokenFile names a file holding it (one trailing newline dropped);
	// set one or neither.
	Token, TokenFile string

	// OwnPosition is the capability reported in the handshake: the sink stores the committed
	// position in its destination in the same atomic commit as the data and answers Position.
	// When false, Position is never called (the workers keep the position in their out-of-sink
	// store after each acknowledged Apply) and the sink's Apply only has to write the rows.
	OwnPosition bool

	// Name and Version identify the plugin in the handshake (`sluice check` prints them).
	Name, Version string

	// Health, when set, answers the Health call: nil when the plugin can write now.
	Health func(ctx context.Context) error

	// Ready, when set, is called once with the address Serve listens on, before serving.
	Ready func(addr net.Addr)

	// Logger receives one line per failed call; nil: slog.Default().
	Logger *slog.Logger

	// StopGrace bounds how long Serve lets running calls finish after ctx is done (default 10s).
	StopGrace time.Duration
}

// ReadyLine is the line AnnounceReady prints: the prefix, then the address.
const ReadyLine = "sluice plugin listening on "

// AnnounceReady returns a Ready function that prints ReadyLine and the address to w (a plugin's
// stdout), so whoever started the plugin with port 0 learns its port.
func AnnounceReady(w io.Writer) func(net.Addr) {
	return func(a net.Addr) { fmt.Fprintln(w, ReadyLine+a.String()) }
}

// RegisterFlags binds the connection settings of o to command-line flags of fs: -listen,
// -tls-cert-file, -tls-key-file, -tls-client-ca-file and -token-file (the token itself only
// from a file or the environment variable SLUICE_PLUGIN_TOKEN, never a flag that ps shows).
func (o *ServeOptions) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Address, "listen", "127.0.0.1:50051", "host:port to serve on (port 0: any free port)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "PEM certificate to serve TLS with (with -tls-key-file)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "PEM private key of -tls-cert-file")
	fs.StringVar(&o.TLSClientCAFile, "tls-client-ca-file", "", "PEM CA bundle that must sign the workers' client certificates (mutual TLS)")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token workers must send (or set SLUICE_PLUGIN_TOKEN)")
	if o.Token == "" {
		o.Token = os.Getenv("SLUICE_PLUGIN_TOKEN")
	}
}

// Serve serves s to Sluice workers until ctx is done, then stops accepting calls, lets running
// ones finish for up to StopGrace, closes s and returns nil. It returns an error when it cannot
// listen or its TLS or token settings are wrong. s must be safe for concurrent use by
// different tables, as every sinks.Sink is.
func Serve(ctx context.Context, s sinks.Sink, opts ServeOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	token, err := opts.token()
	if err != nil {
		return err
	}
	var sopts []grpc.ServerOption
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" || opts.TLSClientCAFile != "" {
		tc, err := opts.tlsConfig()
		if err != nil {
			return err
		}
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(tc)))
	}
	if token != "" {
		a := bearer{token: "Bearer " + token}
		sopts = append(sopts, grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream))
	}
	lis := opts.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", opts.Address); err != nil {
			return fmt.Errorf("listening on %s: %w", opts.Address, err)
		}
	}
	srv := grpc.NewServer(sopts...)
	pluginv1.RegisterSinkServer(srv, &server{sink: s, opts: opts})
	if opts.Ready != nil {
		opts.Ready(lis.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(opts.StopGrace):
			srv.Stop()
		}
		err = <-served
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), opts.StopGrace)
	defer cancel()
	cerr := s.Close(closeCtx)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return errors.Join(fmt.Errorf("serving on %s: %w", lis.Addr(), err), cerr)
	}
	if cerr != nil {
		return fmt.Errorf("closing the sink: %w", cerr)
	}
	return nil
}

func (o ServeOptions) token() (string, error) {
	switch {
	case o.Token != "" && o.TokenFile != "":
		return "", errors.New("both a token and a token file are set; keep one")
	case o.TokenFile != "":
		data, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("reading the token file: %w", err)
		}
		t := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if strings.TrimSpace(t) == "" {
			return "", fmt.Errorf("the token file %s is empty; write the token into it", o.TokenFile)
		}
		return t, nil
	}
	return o.Token, nil
}

func (o ServeOptions) tlsConfig() (*tls.Config, error) {
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and its key file")
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w", o.TLSCertFile, o.TLSKeyFile, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if o.TLSClientCAFile != "" {
		pem, err := os.ReadFile(o.TLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the client CA file %s holds no PEM certificate", o.TLSClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// bearer checks the authorization metadata of every call.
type bearer struct{ token string }

func (b bearer) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if subtle.ConstantTimeCompare([]byte(v), []byte(b.token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "missing or wrong bearer token")
}

func (b bearer) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (b bearer) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := b.check(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
