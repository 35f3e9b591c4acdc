package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin/internal/wire"
	pluginv1 "github.com/sluicecdc/sluice/sinks/plugin/proto/sluice/plugin/v1"
)

// Config is the sink.plugin section of a pipeline's configuration (defined and validated in
// package config).
type Config = config.Plugin

// Handshake is what a plugin said about itself when the Client connected.
type Handshake struct {
	ProtocolVersion uint32
	// OwnPosition: the plugin stores the committed position with its data and answers
	// Position. Without it the position lives in the out-of-sink store.
	OwnPosition bool
	Deletes     bool // the plugin applies delete rows (required)
	Maintenance bool // the plugin answers Maintain
	Name        string
	Version     string
}

// String is the handshake as `sluice check` prints it.
func (h Handshake) String() string {
	name := h.Name
	if name == "" {
		name = "(unnamed)"
	}
	if h.Version != "" {
		name += " " + h.Version
	}
	return fmt.Sprintf("plugin %s, protocol version %d, own position %t, deletes %t, maintenance %t",
		name, h.ProtocolVersion, h.OwnPosition, h.Deletes, h.Maintenance)
}

// Client is a plugin sink: a sinks.Sink and sinks.Maintainer whose every call goes to the
// plugin process. It is safe for concurrent use, as the plugin must be.
type Client struct {
	addr string
	conn *grpc.ClientConn
	rpc  pluginv1.SinkClient
	hs   Handshake
}

var (
	_ sinks.Sink       = (*Client)(nil)
	_ sinks.Maintainer = (*Client)(nil)
)

// Open connects to the plugin cfg names (with its TLS and token) and does the handshake: a
// plugin that cannot be reached, refuses the token, speaks another protocol version or does
// not apply deletes is an error saying so. The caller closes the Client.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	var opts []grpc.DialOption
	if cfg.TLS.On() {
		tc, err := cfg.TLS.ClientConfig("sink.plugin.tls")
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(cfg.Token)))
	}
	conn, err := grpc.NewClient(cfg.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the plugin at %s (sink.plugin.address): %w", cfg.Address, err)
	}
	c := &Client{addr: cfg.Address, conn: conn, rpc: pluginv1.NewSinkClient(conn)}
	resp, err := c.rpc.Handshake(ctx, &pluginv1.HandshakeRequest{ProtocolVersion: wire.ProtocolVersion})
	if err != nil {
		_ = conn.Close()
		return nil, wire.FromStatus(err, fmt.Sprintf("handshake with the plugin at %s (sink.plugin.address)", cfg.Address))
	}
	caps := resp.GetCapabilities()
	c.hs = Handshake{ProtocolVersion: resp.GetProtocolVersion(), OwnPosition: caps.GetOwnPosition(), Deletes: caps.GetDeletes(),
		Maintenance: caps.GetMaintenance(), Name: resp.GetName(), Version: resp.GetVersion()}
	switch {
	case c.hs.ProtocolVersion != wire.ProtocolVersion:
		_ = conn.Close()
		return nil, fmt.Errorf("the plugin at %s speaks protocol version %d, this worker %d: upgrade the older of the two", cfg.Address, c.hs.ProtocolVersion, wire.ProtocolVersion)
	case !c.hs.Deletes:
		_ = conn.Close()
		return nil, fmt.Errorf("the plugin at %s (%s) does not apply deletes: Sluice replicates deletes, so a plugin must apply them (capability deletes)", cfg.Address, c.hs.Name)
	}
	return c, nil
}

// Handshake returns what the plugin reported when the Client connected.
func (c *Client) Handshake() Handshake { return c.hs }

// OwnPosition reports whether the plugin keeps the committed position itself (capability
// own_position). When false, Position always answers "no position" without asking the plugin,
// and the committed position must come from the out-of-sink position store wrapped around the
// Client. It is the capability reported at Open: a plugin restarted with another capability is
// seen by the next Open (a worker restart).
func (c *Client) OwnPosition() bool { return c.hs.OwnPosition }

// EnsureTable asks the plugin to create or evolve spec's target.
func (c *Client) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	_, err := c.rpc.EnsureTable(ctx, &pluginv1.EnsureTableRequest{Spec: wire.SpecToProto(spec)})
	return wire.FromStatus(err, c.doing("EnsureTable", spec))
}

// Position asks the plugin for the committed position of spec's target; without the
// own_position capability it answers ok false and asks nothing.
func (c *Client) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	if !c.hs.OwnPosition {
		return batch.SourcePosition{}, false, nil
	}
	resp, err := c.rpc.Position(ctx, &pluginv1.PositionRequest{Spec: wire.SpecToProto(spec)})
	if err != nil {
		return batch.SourcePosition{}, false, wire.FromStatus(err, c.doing("Position", spec))
	}
	if !resp.GetOk() {
		return batch.SourcePosition{}, false, nil
	}
	return wire.PositionFromProto(resp.GetPosition()), true, nil
}

// Apply streams b to the plugin (its header, then its record as Arrow IPC) and returns once the
// plugin acknowledged the commit.
func (c *Client) Apply(ctx context.Context, b sinks.Batch) error {
	what := c.doing("Apply", b.Spec)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream if it fails half-way
	stream, err := c.rpc.Apply(ctx)
	if err != nil {
		return wire.FromStatus(err, what)
	}
	var rows int64
	if b.Record != nil {
		rows = b.Record.NumRows()
	}
	hdr := &pluginv1.ApplyHeader{Spec: wire.SpecToProto(b.Spec), Phase: string(b.Phase),
		Lo: wire.PositionToProto(b.Lo), Hi: wire.PositionToProto(b.Hi), Rows: rows}
	send := func(m *pluginv1.ApplyRequest) error { return stream.Send(m) }
	err = send(&pluginv1.ApplyRequest{Part: &pluginv1.ApplyRequest_Header{Header: hdr}})
	if err == nil {
		err = wire.SendRecord(b.Record, func(p []byte) error {
			return send(&pluginv1.ApplyRequest{Part: &pluginv1.ApplyRequest_ArrowIpc{ArrowIpc: p}})
		})
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", what, err) // io.EOF: the plugin ended the call; its status follows
	}
	_, err = stream.CloseAndRecv()
	return wire.FromStatus(err, what)
}

// DiscardSnapshot asks the plugin to remove the partial snapshot of spec's target.
func (c *Client) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	_, err := c.rpc.DiscardSnapshot(ctx, &pluginv1.DiscardSnapshotRequest{Spec: wire.SpecToProto(spec)})
	return wire.FromStatus(err, c.doing("DiscardSnapshot", spec))
}

// Maintain asks the plugin to tidy spec's target; without the maintenance capability it does
// nothing and reports nothing.
func (c *Client) Maintain(ctx context.Context, spec sinks.TableSpec) (sinks.MaintenanceReport, error) {
	if !c.hs.Maintenance {
		return sinks.MaintenanceReport{}, nil
	}
	resp, err := c.rpc.Maintain(ctx, &pluginv1.MaintainRequest{Spec: wire.SpecToProto(spec)})
	if err != nil {
		return nil, wire.FromStatus(err, c.doing("Maintain", spec))
	}
	return sinks.MaintenanceReport(resp.GetReport()), nil
}

// Health asks the plugin whether it can write now: nil, or why not.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.rpc.Health(ctx, &pluginv1.HealthRequest{})
	if err != nil {
		return wire.FromStatus(err, fmt.Sprintf("health of the plugin at %s", c.addr))
	}
	if !resp.GetServing() {
		return fmt.Errorf("the plugin at %s is not serving: %s", c.addr, resp.GetMessage())
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close(context.Context) error { return c.conn.Close() }

func (c *Client) doing(call string, spec sinks.TableSpec) string {
	return fmt.Sprintf("plugin %s of target %s (table %s, plugin at %s)", call, spec.Target, spec.Schema.Table, c.addr)
}

// bearer sends the token as `authorization: Bearer <token>` with every call, only over TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
