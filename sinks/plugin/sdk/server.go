package sdk

import (
	"context"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin/internal/wire"
	pluginv1 "github.com/sluicecdc/sluice/sinks/plugin/proto/sluice/plugin/v1"
)

// server adapts a sinks.Sink to the protocol's Sink service.
type server struct {
	pluginv1.UnimplementedSinkServer
	sink sinks.Sink
	opts ServeOptions
}

// fail logs a failed call and returns its classified status.
func (s *server) fail(call string, spec *pluginv1.TableSpec, err error) error {
	s.opts.Logger.Warn("plugin call failed", logkey.Call, call, logkey.Target, spec.GetTarget(), logkey.Poison, sinks.IsPoison(err), logkey.Error, err)
	return wire.ToStatus(err, codes.Unknown)
}

func (s *server) Handshake(_ context.Context, req *pluginv1.HandshakeRequest) (*pluginv1.HandshakeResponse, error) {
	if req.GetProtocolVersion() != wire.ProtocolVersion {
		return nil, status.Errorf(codes.FailedPrecondition, "this plugin speaks protocol version %d, the worker %d: upgrade the older of the two",
			wire.ProtocolVersion, req.GetProtocolVersion())
	}
	_, maint := s.sink.(sinks.Maintainer)
	return &pluginv1.HandshakeResponse{
		ProtocolVersion: wire.ProtocolVersion,
		Capabilities:    &pluginv1.Capabilities{OwnPosition: s.opts.OwnPosition, Deletes: true, Maintenance: maint},
		Name:            s.opts.Name, Version: s.opts.Version,
	}, nil
}

func (s *server) EnsureTable(ctx context.Context, req *pluginv1.EnsureTableRequest) (*pluginv1.EnsureTableResponse, error) {
	if err := s.sink.EnsureTable(ctx, wire.SpecFromProto(req.GetSpec())); err != nil {
		return nil, s.fail("EnsureTable", req.GetSpec(), err)
	}
	return &pluginv1.EnsureTableResponse{}, nil
}

func (s *server) Apply(stream pluginv1.Sink_ApplyServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "the first message of Apply must be its header")
	}
	spec := wire.SpecFromProto(h.GetSpec())
	next := func() ([]byte, error) {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if m.GetHeader() != nil {
			return nil, status.Error(codes.InvalidArgument, "Apply carries one header, first")
		}
		return m.GetArrowIpc(), nil
	}
	rec, err := wire.ReadRecord(memory.DefaultAllocator, spec.Schema, next)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || stream.Context().Err() != nil {
			return status.FromContextError(stream.Context().Err()).Err()
		}
		return status.Errorf(codes.InvalidArgument, "target %s: %v", spec.Target, err)
	}
	defer rec.Release()
	b := sinks.Batch{Spec: spec, Phase: batch.Phase(h.GetPhase()), Record: rec,
		Lo: wire.PositionFromProto(h.GetLo()), Hi: wire.PositionFromProto(h.GetHi())}
	if err := s.sink.Apply(stream.Context(), b); err != nil {
		return s.fail("Apply", h.GetSpec(), err)
	}
	return stream.SendAndClose(&pluginv1.ApplyResponse{})
}

func (s *server) Position(ctx context.Context, req *pluginv1.PositionRequest) (*pluginv1.PositionResponse, error) {
	if !s.opts.OwnPosition {
		return nil, status.Error(codes.Unimplemented, "this plugin has no position of its own (capability own_position is false)")
	}
	pos, ok, err := s.sink.Position(ctx, wire.SpecFromProto(req.GetSpec()))
	if err != nil {
		return nil, s.fail("Position", req.GetSpec(), err)
	}
	out := &pluginv1.PositionResponse{Ok: ok}
	if ok {
		out.Position = wire.PositionToProto(pos)
	}
	return out, nil
}

func (s *server) DiscardSnapshot(ctx context.Context, req *pluginv1.DiscardSnapshotRequest) (*pluginv1.DiscardSnapshotResponse, error) {
	if err := s.sink.DiscardSnapshot(ctx, wire.SpecFromProto(req.GetSpec())); err != nil {
		return nil, s.fail("DiscardSnapshot", req.GetSpec(), err)
	}
	return &pluginv1.DiscardSnapshotResponse{}, nil
}

func (s *server) Maintain(ctx context.Context, req *pluginv1.MaintainRequest) (*pluginv1.MaintainResponse, error) {
	m, ok := s.sink.(sinks.Maintainer)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this plugin has no table maintenance (capability maintenance is false)")
	}
	rep, err := m.Maintain(ctx, wire.SpecFromProto(req.GetSpec()))
	if err != nil {
		return nil, s.fail("Maintain", req.GetSpec(), err)
	}
	return &pluginv1.MaintainResponse{Report: rep}, nil
}

func (s *server) Health(ctx context.Context, _ *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	if s.opts.Health == nil {
		return &pluginv1.HealthResponse{Serving: true}, nil
	}
	if err := s.opts.Health(ctx); err != nil {
		return &pluginv1.HealthResponse{Serving: false, Message: err.Error()}, nil
	}
	return &pluginv1.HealthResponse{Serving: true}, nil
}
