package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// SafeFunc reports what the caller has not yet durably committed: the lowest position of any
// change it holds (buffered, staged, or committing; for a table being backfilled, the snapshot's
// position) and whether it holds anything at all. The stream confirms the slot up to the commit
// LSN of that position, never past it; when nothing is outstanding it confirms its own position.
// The stream calls it from its receiving goroutine, concurrently with the handler: it must be
// safe for concurrent use, and it must count a change as held from before the handler returns
// for it.
type SafeFunc func() (lowest batch.Position, outstanding bool)

// Handler receives the stream's events, one at a time, in stream order, on the goroutine that
// called Run. Values in an event are not reused by the stream: the handler may keep them. A
// non-nil error stops Run, which returns it.
type Handler func(ctx context.Context, ev Event) error

// StreamOptions configure a Stream.
type StreamOptions struct {
	// Start is the LSN to stream from: transactions that commit at or after it are delivered
	// (unless the slot has confirmed further). 0 means the slot's confirmed position.
	Start uint64
	// Schemas are the pipeline's tables as discovered (Info.Schemas, or schemas carried from an
	// earlier run). Changes follow them until a SchemaEvent says otherwise. A table not among
	// them is reported with a SchemaEvent whose Old is nil, except under a FOR ALL TABLES
	// publication, where it is ignored.
	Schemas []batch.Schema
	// Safe is required: see SafeFunc.
	Safe SafeFunc
	// StatusInterval is how often a standby status update is sent (default 5s, at most 10s),
	// also while the handler is busy.
	StatusInterval time.Duration
	// ProgressInterval is how often a ProgressEvent comes when nothing else does (default 1s).
	ProgressInterval time.Duration
	// ReadAhead is how many messages are received ahead of the handler (default 256). It bounds
	// the stream's memory together with the size of one message.
	ReadAhead int
	Logger    *slog.Logger
	// BeforeLastStatus, when set, is called before the status update Run sends when it stops, so
	// that Safe can answer from fresh state (the stream's caller lists what it still holds).
	BeforeLastStatus func(ctx context.Context)
	// Attnums are the attnums of the columns of Schemas, by table, as recorded with each schema
	// (SchemaEvent.Attnums, or the catalog's when the schema was read from it); a table without
	// them is told a rename from a drop and an add at its first RELATION by a weaker rule (see
	// renames).
	Attnums map[batch.TableName]map[string]int16
	// Confirms, when set, keeps the furthest position the stream ever confirmed to the slot, so
	// that a slot created again under the same name, or advanced by hand, is recognized: see
	// ConfirmLog. Nil skips both the record and the check.
	Confirms ConfirmLog
}

// ConfirmLog keeps, outside Postgres, the furthest position the stream ever confirmed to the
// pipeline's slot. Postgres keeps no creation mark of a slot: one dropped and created again
// under the same name, or advanced by hand (pg_replication_slot_advance), looks like the
// pipeline's own, but its confirmed position is past everything Sluice confirmed, and the
// changes in between were never read. Run checks that at its start and fails with SlotLost.
type ConfirmLog interface {
	// Furthest returns the furthest position recorded; ok is false when none is (a pipeline set
	// up before the log was kept, or a slot created since the last record): Run then skips the
	// check.
	Furthest(ctx context.Context) (lsn uint64, ok bool, err error)
	// Record durably records lsn as the furthest position confirmed. Run calls it from one
	// goroutine at a time, before it sends a confirmation beyond the last recorded position (a
	// crash between the two leaves the record ahead of the slot, which the check allows), with
	// lsn growing, at most once per confirmRecordEvery.
	Record(ctx context.Context, lsn uint64) error
}

// confirmRecordEvery bounds how often the stream writes its ConfirmLog: a confirmation beyond
// the record waits for the next status update after it (every StatusInterval, or at once when
// the server asks for a reply). Each record covers everything received so far, so a pipeline
// that confirms every StatusInterval writes one small object per StatusInterval at most.
const confirmRecordEvery = time.Second

// shutdownProbeEvery bounds how often the stream probes for a shutdown of the server (see
// Stream.probeShutdown).
const shutdownProbeEvery = time.Second

// Stream streams a pipeline's slot: START_REPLICATION with pgoutput protocol version 1, decoding,
// keepalives, and standby status updates that confirm only what the caller's SafeFunc allows.
type Stream struct {
	cfg  Config
	opts StreamOptions
	log  *slog.Logger

	streamLSN atomic.Uint64 // the position confirmable when the caller holds nothing
	confirmed atomic.Uint64 // the last flush position sent

	// recorded is the furthest position the ConfirmLog holds (or the slot's confirmed position
	// at the start, when higher), recordedAt when the stream last wrote it, and probedAt when it
	// last probed for a shutdown: used by the goroutine that sends status updates only.
	recorded   uint64
	recordedAt time.Time
	probedAt   time.Time
}

// NewReader checks the options; it connects to nothing (Run does).
func NewStream(cfg Config, opts StreamOptions) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, failure.Permanent(err)
	}
	if opts.Safe == nil {
		return nil, errors.New("stream options: Safe is required")
	}
	if opts.StatusInterval <= 0 || opts.StatusInterval > 10*time.Second {
		opts.StatusInterval = 5 * time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = 256
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stream{cfg: cfg, opts: opts, log: log.With(slog.String(logSlot, cfg.Slot))}, nil
}

// Confirmed returns the last flush position the stream sent to the server (0 before the first).
func (r *Stream) Confirmed() uint64 { return r.confirmed.Load() }

// wireMsg is one message received from the server, parsed, on its way to the handler.
type wireMsg struct {
	msg       pglogrepl.Message                  // a pgoutput message, or nil
	keepalive *pglogrepl.PrimaryKeepaliveMessage // or a keepalive
}

// Run connects, starts replication and calls h for every event until ctx is cancelled (it then
// returns ctx.Err()), h fails, or the connection fails. It sends a last status update and closes
// its connections before returning. Run may be called again after it returns (the stream
// restarts from the slot); it must not run twice at the same time.
func (r *Stream) Run(ctx context.Context, h Handler) error {
	conn, err := connect(ctx, r.cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s, err := readSlot(ctx, conn, r.cfg.Slot)
	if err != nil {
		return err
	}
	if !s.Exists {
		return slotLost(r.cfg.Slot, "does not exist: it was dropped while the pipeline ran")
	}
	if s.WALStatus == WALLost {
		return slotLost(r.cfg.Slot, invalidated)
	}
	if err := r.checkConfirms(ctx, s.Confirmed); err != nil {
		return err
	}
	start := max(r.opts.Start, s.Confirmed)
	r.streamLSN.Store(start)
	r.confirmed.Store(s.Confirmed)

	resolver := newTypeResolver(conn)
	dec := newDecoder(resolver.relColumn, r.opts.Schemas, r.log)
	dec.attrs = resolver.attributes
	dec.recorded = r.opts.Attnums
	if err := r.tableOIDs(ctx, conn, dec); err != nil {
		return err
	}

	rconn, err := connectReplication(ctx, r.cfg.DSN)
	if err != nil {
		return err
	}
	defer rconn.Close(context.WithoutCancel(ctx))
	args := []string{"proto_version '1'", "publication_names " + quoteLiteral(quoteIdent(r.cfg.Publication))}
	err = pglogrepl.StartReplication(ctx, rconn, r.cfg.Slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			return fmt.Errorf("starting replication on slot %s: %w (%s)", r.cfg.Slot, ErrSlotInUse, pgErr.Message)
		}
		return fmt.Errorf("starting replication on slot %s at %s: %w", r.cfg.Slot, formatLSN(start), err)
	}
	r.log.Info("replication started", slog.String(logLSN, formatLSN(start)))

	msgs := make(chan wireMsg, r.opts.ReadAhead)
	wctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		recvErr = make(chan error, 1)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		recvErr <- r.receive(wctx, rconn, msgs)
	}()
	err = r.dispatch(ctx, dec, start, msgs, recvErr, h)
	cancel()
	wg.Wait()
	// A last status update, so a clean stop does not leave confirmable WAL behind.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	if r.opts.BeforeLastStatus != nil {
		r.opts.BeforeLastStatus(sctx)
	}
	if serr := r.sendStatus(sctx, rconn, true); serr != nil && err == nil {
		err = serr
	}
	return err
}

// tableOIDs records the relation OIDs of the known tables, so that a table renamed before its
// first RELATION message of this run is recognized by its OID, and decides whether tables not
// known may be ignored: only when the publication is FOR ALL TABLES. With a FOR TABLE
// publication an unknown name is a pipeline table renamed while the stream was down (or one
// added to the publication by hand), and it is reported (SchemaEvent with Old nil), never
// ignored.
func (r *Stream) tableOIDs(ctx context.Context, conn *pgx.Conn, dec *decoder) error {
	var allTables bool
	err := conn.QueryRow(ctx, `SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1`, r.cfg.Publication).Scan(&allTables)
	if errors.Is(err, pgx.ErrNoRows) {
		return failure.Permanentf("publication %s does not exist: run the pipeline's setup", r.cfg.Publication)
	}
	if err != nil {
		return fmt.Errorf("reading publication %s: %w", r.cfg.Publication, err)
	}
	dec.only = allTables && len(r.opts.Schemas) > 0
	if len(r.opts.Schemas) == 0 {
		return nil
	}
	names := make([]string, len(r.opts.Schemas))
	for i, sc := range r.opts.Schemas {
		names[i] = quoteTable(sc.Table)
	}
	rows, err := conn.Query(ctx, `SELECT ord, to_regclass(n)::oid FROM unnest($1::text[]) WITH ORDINALITY AS t(n, ord)`, names)
	if err != nil {
		return fmt.Errorf("looking up the pipeline's tables: %w", err)
	}
	var (
		ord int
		oid *uint32
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &oid}, func() error {
		if oid != nil {
			dec.oids[*oid] = r.opts.Schemas[ord-1].Table
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("looking up the pipeline's tables: %w", err)
	}
	return nil
}

// dispatch decodes messages and calls the handler until ctx ends, the receiver fails or the
// handler fails. start is the position the stream started at.
func (r *Stream) dispatch(ctx context.Context, dec *decoder, start uint64, msgs <-chan wireMsg, recvErr <-chan error, h Handler) error {
	tick := time.NewTicker(r.opts.ProgressInterval)
	defer tick.Stop()
	emit := func(ev Event) error {
		if err := h(ctx, ev); err != nil {
			return err
		}
		if c, ok := ev.(*CommitEvent); ok {
			r.advance(c.EndLSN)
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case m := <-msgs:
			if m.keepalive != nil {
				// The server's WAL end is confirmable only between transactions: within one it
				// is past the commit of the transaction being sent.
				if dec.inTxn {
					continue
				}
				end := uint64(m.keepalive.ServerWALEnd)
				r.advance(end)
				if err := h(ctx, &ProgressEvent{StreamLSN: r.streamLSN.Load(), CaughtUp: end > start}); err != nil {
					return err
				}
				continue
			}
			if err := dec.decode(ctx, m.msg, emit); err != nil {
				return err
			}
		case <-tick.C:
			if err := h(ctx, &ProgressEvent{StreamLSN: r.streamLSN.Load(), InTxn: dec.inTxn}); err != nil {
				return err
			}
		}
	}
}

// advance moves the stream's own position forward to lsn.
func (r *Stream) advance(lsn uint64) {
	for {
		cur := r.streamLSN.Load()
		if lsn <= cur || r.streamLSN.CompareAndSwap(cur, lsn) {
			return
		}
	}
}

// receive owns the replication connection: it reads messages, hands them to dispatch, answers
// keepalives and sends status updates every StatusInterval, also while dispatch is busy.
func (r *Stream) receive(ctx context.Context, conn *pgconn.PgConn, out chan<- wireMsg) error {
	next := time.Now().Add(r.opts.StatusInterval)
	// One deadline context per status period, not one per message: receiving a large
	// transaction is a million calls.
	dl := &deadline{}
	defer dl.stop()
	for {
		if !time.Now().Before(next) {
			if err := r.sendStatus(ctx, conn, false); err != nil {
				return err
			}
			next = time.Now().Add(r.opts.StatusInterval)
		}
		raw, err := conn.ReceiveMessage(dl.until(ctx, next))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receiving from replication slot %s: %w", r.cfg.Slot, err)
		}
		var m wireMsg
		switch msg := raw.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parsing keepalive: %w", err)
				}
				if ka.ReplyRequested {
					if err := r.sendStatus(ctx, conn, false); err != nil {
						return err
					}
					next = time.Now().Add(r.opts.StatusInterval)
					if r.confirmed.Load() < uint64(ka.ServerWALEnd) {
						if err := r.probeShutdown(ctx); err != nil {
							return err
						}
					}
				}
				m.keepalive = &ka
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parsing XLogData: %w", err)
				}
				// Parse copies what it keeps out of the connection's buffer, which the next
				// receive reuses.
				if m.msg, err = pglogrepl.Parse(xld.WALData); err != nil {
					return fmt.Errorf("parsing pgoutput message at %s: %w", xld.WALStart, err)
				}
			default:
				continue
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication slot %s: %w", r.cfg.Slot, pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return fmt.Errorf("replication slot %s: %w", r.cfg.Slot, ErrStreamEnded)
		default:
			continue
		}
		if err := r.forward(ctx, conn, out, m, &next); err != nil {
			return err
		}
	}
}

// forward hands m to dispatch, sending status updates while it waits.
func (r *Stream) forward(ctx context.Context, conn *pgconn.PgConn, out chan<- wireMsg, m wireMsg, next *time.Time) error {
	select {
	case out <- m:
		return nil
	default:
	}
	for {
		t := time.NewTimer(time.Until(*next))
		select {
		case out <- m:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
			if err := r.sendStatus(ctx, conn, false); err != nil {
				return err
			}
			*next = time.Now().Add(r.opts.StatusInterval)
		}
	}
}

// sendStatus sends a standby status update whose flush and apply positions are the safe
// position: the commit LSN of the lowest change the caller holds, or the stream's own position
// when it holds none; never lower than what was already confirmed, and never beyond what the
// ConfirmLog holds (recordConfirm writes it first). last is the update Run sends when it stops,
// which records without waiting for confirmRecordEvery.
func (r *Stream) sendStatus(ctx context.Context, conn *pgconn.PgConn, last bool) error {
	// Read the stream's position before asking the caller: a change handed over after this
	// point commits at or after this position, so it cannot be confirmed by mistake.
	own := r.streamLSN.Load()
	low, outstanding := r.opts.Safe()
	flush := safeFlush(own, r.confirmed.Load(), low, outstanding)
	flush = r.recordConfirm(ctx, own, flush, last)
	if flush == 0 {
		return nil // nothing known yet; the library would replace a 0 flush by the write position
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pglogrepl.LSN(max(own, flush)),
		WALFlushPosition: pglogrepl.LSN(flush),
		WALApplyPosition: pglogrepl.LSN(flush),
	})
	if err != nil {
		return fmt.Errorf("sending standby status to slot %s: %w", r.cfg.Slot, err)
	}
	r.confirmed.Store(flush)
	return nil
}

// deadline keeps one context with a deadline and renews it when the deadline changes.
type deadline struct {
	ctx    context.Context
	at     time.Time
	cancel context.CancelFunc
}

// until returns a context derived from parent that ends at t.
func (d *deadline) until(parent context.Context, t time.Time) context.Context {
	if d.ctx == nil || !d.at.Equal(t) {
		d.stop()
		d.ctx, d.cancel = context.WithDeadline(parent, t)
		d.at = t
	}
	return d.ctx
}

func (d *deadline) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

// safeFlush computes the flush position of a status update: the stream's own position own,
// lowered to the commit LSN of the lowest outstanding change (that transaction is then sent
// again after a restart, since a slot skips only transactions committing before its confirmed
// position), and never below last, what was confirmed before.
func safeFlush(own, last uint64, low batch.Position, outstanding bool) uint64 {
	flush := own
	if outstanding && low.LSN < flush {
		flush = low.LSN
	}
	return max(flush, last)
}
