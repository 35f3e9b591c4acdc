// Package wire converts between Sluice's sink types and the plugin protocol's messages, for
// both ends of a plugin connection (the worker's client and the SDK's server): table specs,
// positions, the Arrow IPC stream of a batch, and errors with their classification. Each
// conversion lives here once, so the two ends cannot drift.
package wire

import (
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	pluginv1 "github.com/sluicecdc/sluice/sinks/plugin/proto/sluice/plugin/v1"
)

// ProtocolVersion is the protocol version both ends of this build speak.
const ProtocolVersion = uint32(pluginv1.ProtocolVersion_PROTOCOL_VERSION_1)

// SpecToProto is spec as the protocol carries it.
func SpecToProto(spec sinks.TableSpec) *pluginv1.TableSpec {
	out := &pluginv1.TableSpec{
		Target: spec.Target,
		Table:  &pluginv1.TableName{Schema: spec.Schema.Table.Schema, Name: spec.Schema.Table.Name},
	}
	for _, c := range spec.Schema.Columns {
		out.Columns = append(out.Columns, &pluginv1.Column{
			Name: c.Name, TypeOid: c.TypeOID, TypeName: c.TypeName, TypeMod: c.TypeMod, NotNull: c.NotNull,
			Key: c.Key, Category: c.Category, ElemOid: c.ElemOID, Dims: int32(c.Dims), ElemCategory: c.ElemCategory,
		})
	}
	for _, m := range spec.Metadata {
		out.Metadata = append(out.Metadata, &pluginv1.MetadataColumn{From: m.From, As: m.As})
	}
	return out
}

// SpecFromProto is the sinks.TableSpec of p (a nil p is the zero spec).
func SpecFromProto(p *pluginv1.TableSpec) sinks.TableSpec {
	spec := sinks.TableSpec{Target: p.GetTarget()}
	spec.Schema.Table = batch.TableName{Schema: p.GetTable().GetSchema(), Name: p.GetTable().GetName()}
	for _, c := range p.GetColumns() {
		spec.Schema.Columns = append(spec.Schema.Columns, batch.Column{
			Name: c.GetName(), TypeOID: c.GetTypeOid(), TypeName: c.GetTypeName(), TypeMod: c.GetTypeMod(),
			NotNull: c.GetNotNull(), Key: c.GetKey(), Category: c.GetCategory(), ElemOID: c.GetElemOid(),
			Dims: int(c.GetDims()), ElemCategory: c.GetElemCategory(),
		})
	}
	for _, m := range p.GetMetadata() {
		spec.Metadata = append(spec.Metadata, sinks.MetadataColumn{From: m.GetFrom(), As: m.GetAs()})
	}
	return spec
}

// PositionToProto is pos as the protocol carries it.
func PositionToProto(pos batch.SourcePosition) *pluginv1.SourcePosition {
	return &pluginv1.SourcePosition{
		Source: &pluginv1.SourceId{SystemId: pos.Source.SystemID, Timeline: pos.Source.Timeline, Slot: pos.Source.Slot},
		Lsn:    pos.Position.LSN, Seq: pos.Position.Seq,
	}
}

// PositionFromProto is the batch.SourcePosition of p (a nil p is the zero position).
func PositionFromProto(p *pluginv1.SourcePosition) batch.SourcePosition {
	s := p.GetSource()
	return batch.SourcePosition{
		Source:   batch.SourceID{SystemID: s.GetSystemId(), Timeline: s.GetTimeline(), Slot: s.GetSlot()},
		Position: batch.Position{LSN: p.GetLsn(), Seq: p.GetSeq()},
	}
}
