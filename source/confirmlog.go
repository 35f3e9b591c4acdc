package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/internal/logkey"
)

// checkConfirms fails with SlotLost when the slot's confirmed position (confirmed) is past the
// furthest position the ConfirmLog says the stream ever confirmed: someone else created the slot
// again under the same name or advanced it, and the changes in between were never read. It
// sets the position recordConfirm starts from.
func (r *Stream) checkConfirms(ctx context.Context, confirmed uint64) error {
	r.recorded = confirmed
	if r.opts.Confirms == nil {
		return nil
	}
	furthest, ok, err := r.opts.Confirms.Furthest(ctx)
	if err != nil {
		return fmt.Errorf("reading the furthest position confirmed to replication slot %s: %w", r.cfg.Slot, err)
	}
	if !ok {
		return nil
	}
	if err := confirmedBeyond(r.cfg.Slot, confirmed, furthest); err != nil {
		return err
	}
	r.recorded = max(confirmed, furthest)
	return nil
}

// confirmedBeyond is the SlotLost of a slot whose confirmed position is past the furthest
// position Sluice confirmed to it; nil when it is not.
func confirmedBeyond(slot string, confirmed, furthest uint64) error {
	if confirmed <= furthest {
		return nil
	}
	return slotLost(slot, fmt.Sprintf("was created again or advanced outside Sluice: its confirmed position %s is past %s, the furthest position Sluice ever confirmed to it, "+
		"so the changes committed between them were never read (a slot dropped and created again by hand under the same name, or moved by pg_replication_slot_advance)",
		formatLSN(confirmed), formatLSN(furthest)))
}

// recordConfirm returns the flush position a status update may carry: flush, once the
// ConfirmLog holds a position at or past it. It writes the log first when flush is beyond it,
// at most once per confirmRecordEvery (unless last), recording own (everything received, at
// least flush) so that the confirmations of the next while need no write. A flush it cannot
// record yet is lowered to the recorded position: the update still goes out, as a reply.
func (r *Stream) recordConfirm(ctx context.Context, own, flush uint64, last bool) uint64 {
	if r.opts.Confirms == nil || flush <= r.recorded {
		return flush
	}
	if last || time.Since(r.recordedAt) >= confirmRecordEvery {
		mark := max(own, flush)
		r.recordedAt = time.Now()
		if err := r.opts.Confirms.Record(ctx, mark); err != nil {
			r.log.Warn("recording the furthest position confirmed to the slot; the slot is confirmed up to the last one recorded",
				slog.String(logLSN, formatLSN(mark)), slog.String(logkey.Error, err.Error()))
		} else {
			r.recorded = mark
		}
	}
	return min(flush, max(r.recorded, r.confirmed.Load()))
}

// probeShutdown tells whether the server is shutting down, when it asks for a reply while the
// reader holds back changes it sent: a walsender ends at a shutdown only once its client has
// confirmed everything it sent (WalSndDone), and a stream that keeps answering would hold up the
// shutdown of the source indefinitely (each reply also resets wal_sender_timeout). So it opens
// an ordinary connection (at most once per shutdownProbeEvery): refused with SQLSTATE 57P03,
// the server is shutting down, and Run returns ErrSourceShuttingDown (retryable; the held
// changes stay unconfirmed and are read again after the restart). Any other outcome is no answer.
func (r *Stream) probeShutdown(ctx context.Context) error {
	if time.Since(r.probedAt) < shutdownProbeEvery {
		return nil
	}
	r.probedAt = time.Now()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := connect(pctx, r.cfg.DSN)
	if err == nil {
		_ = conn.Close(pctx)
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57P03" {
		r.log.Info("the source server is shutting down; closing the replication connection so that the shutdown does not wait for the reader",
			slog.String(logLSN, formatLSN(r.confirmed.Load())))
		return fmt.Errorf("replication slot %s: %w (%s)", r.cfg.Slot, ErrSourceShuttingDown, pgErr.Message)
	}
	return nil
}
