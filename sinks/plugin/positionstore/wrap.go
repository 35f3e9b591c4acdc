package positionstore

import (
	"context"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Wrap returns inner with its positions kept in store: the sink the committer uses for a plugin.
// ownPosition says whether the plugin has a position capability of its own (its handshake).
//
//   - Position is the plugin's own when it has the capability and reports one (the sink wins,
//     whatever the store holds), else the store's.
//   - Apply of a batch with a Hi locks the target's row in the store, runs the guard (without an
//     own position: batch.Covered on the stored position, skipping a batch the target holds
//     whole), calls the plugin's Apply and, only once the plugin acknowledged it, advances the
//     stored position to Hi when Hi is ahead, and commits. The lock makes a stale attempt and its
//     retry take turns, so the guard's check and the position's write are one step. A snapshot
//     chunk (zero Hi) goes to the plugin alone.
//   - DiscardSnapshot runs the plugin's, then clears the stored position, under the same lock.
//   - Close closes inner, then store: Wrap owns store.
//
// The returned sink is a sinks.Maintainer when inner is one.
func Wrap(inner sinks.Sink, ownPosition bool, store *Store) sinks.Sink {
	s := &sink{inner: inner, own: ownPosition, store: store}
	if m, ok := inner.(sinks.Maintainer); ok {
		return &maintainer{sink: s, m: m}
	}
	return s
}

type sink struct {
	inner sinks.Sink
	own   bool
	store *Store
}

type maintainer struct {
	*sink
	m sinks.Maintainer
}

// Maintain runs the plugin's maintenance; it moves no position.
func (m *maintainer) Maintain(ctx context.Context, spec sinks.TableSpec) (sinks.MaintenanceReport, error) {
	return m.m.Maintain(ctx, spec)
}

// EnsureTable is the plugin's.
func (s *sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	return s.inner.EnsureTable(ctx, spec)
}

// Position is the plugin's own position when it has the capability and reports one, else the
// store's.
func (s *sink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	if s.own {
		pos, ok, err := s.inner.Position(ctx, spec)
		if err != nil || ok {
			return pos, ok, err
		}
	}
	return s.store.Position(ctx, spec.Target)
}

// Apply applies b through the plugin, then advances the stored position (see Wrap).
func (s *sink) Apply(ctx context.Context, b sinks.Batch) error {
	if b.Hi.Position.IsZero() {
		return s.inner.Apply(ctx, b)
	}
	h, err := s.store.hold(ctx, b.Spec.Target)
	if err != nil {
		return err
	}
	defer h.release()
	if !s.own {
		// The guard. A plugin with its own position keeps its own guard on the position it
		// reports, which wins over the store's.
		cover, err := batch.Covered(h.pos, h.ok, b.Phase, b.Lo, b.Hi)
		if err != nil {
			return sinks.Poisonf("table %s: batch up to %s does not belong to the source of the position %s the store holds for target %s; resync the table",
				b.Spec.Schema.Table, b.Hi, h.pos, b.Spec.Target)
		}
		if cover == batch.CoverAll {
			return nil
		}
	}
	if err := s.inner.Apply(ctx, b); err != nil {
		return err
	}
	if err := h.advance(ctx, b.Hi); err != nil {
		return err
	}
	return h.commit(ctx)
}

// DiscardSnapshot discards the plugin's partial snapshot, then the stored position.
func (s *sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	h, err := s.store.hold(ctx, spec.Target)
	if err != nil {
		return err
	}
	defer h.release()
	if err := s.inner.DiscardSnapshot(ctx, spec); err != nil {
		return err
	}
	if err := h.clear(ctx); err != nil {
		return err
	}
	return h.commit(ctx)
}

// Close closes the plugin's sink and the store.
func (s *sink) Close(ctx context.Context) error {
	err := s.inner.Close(ctx)
	s.store.Close()
	return err
}
