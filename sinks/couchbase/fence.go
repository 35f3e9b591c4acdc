package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/sluicecdc/sluice/batch"
)

// fenceXattr is the system extended attribute in which every document the sink writes, and every
// tombstone of one it removed, carries the source position of the row that wrote it. A system
// xattr (leading _) is kept by Couchbase when the document is deleted, until the tombstone is
// purged (the bucket's metadata purge interval, 3 days by default).
const fenceXattr = "_sluice"

// maxFenceRounds bounds how often one document is read again after another writer changed it
// between the read and the write. Each round means a concurrent write of the same key, so
// running out says two attempts are racing on it: a transient error, retried.
const maxFenceRounds = 16

// fence is the value of fenceXattr.
type fence struct {
	// Pos is the position (batch.Position text) of the row whose image the document holds, or
	// whose delete the tombstone records.
	Pos string `json:"pos"`
	// Src is the source (batch.SourceID text) of Pos; empty when the batch carried none (a
	// snapshot chunk).
	Src string `json:"src,omitempty"`
	// W holds one member, a random tag of this write. Reviving a tombstone on a server without
	// ReviveDocument removes the tag it read in the same mutation, which fails if any other
	// write came in between: a compare-and-swap that server cannot do by CAS.
	W map[string]int `json:"w"`
	// Ix is the id of the key index (checkpoint.Index) that lists the key: set on every image,
	// and on the tombstone of a delete of a live document, so a tombstone brought back to life
	// need not be indexed again while that index lives; absent on the tombstone of a key that had
	// no document. A discard removes the index, and the next one has another id.
	Ix string `json:"ix,omitempty"`
}

// newFence returns the fence of a write of the row at pos (empty: no position) of src, with a
// fresh write tag.
func newFence(pos, src string) fence {
	return fence{Pos: pos, Src: src, W: map[string]int{"t" + strconv.FormatUint(rand.Uint64(), 16): 0}}
}

// newer reports whether the fence holds a row at or after pos of src, so that pos's image must
// not be written. A fence of another source (both known) is never newer: positions of two
// sources have no order, and the target's checkpoint already refuses a batch of another source
// than its own (see the package doc).
func (f fence) newer(pos batch.Position, src string) (bool, error) {
	if f.Src != "" && src != "" && f.Src != src {
		return false, nil
	}
	stored, err := batch.ParsePosition(f.Pos)
	if err != nil {
		return false, fmt.Errorf("reading the %s extended attribute: %w", fenceXattr, err)
	}
	return pos.Less(stored), nil
}

// docState is what fenceRead found under a key.
type docState struct {
	exists  bool // a live document or a tombstone
	deleted bool // a tombstone
	xattr   bool // it has the fence attribute (cleared by DiscardSnapshot: then without a position)
	fenced  bool // the attribute holds a position
	fence   fence
	cas     gocb.Cas
}

// step is one write decided from a docState.
type step int

const (
	stepSkip        step = iota // the stored row is newer: write nothing
	stepInsert                  // no document: insert body and fence
	stepTombstone               // no document: create a tombstone carrying the fence
	stepReplace                 // a live document: replace body and fence (CAS)
	stepRemove                  // a live document: delete it, keeping the fence (CAS)
	stepMarkDeleted             // a tombstone: move its fence (CAS)
	stepRevive                  // a tombstone: bring it back with body and fence (CAS)
)

// String names the step for test failures.
func (s step) String() string {
	names := [...]string{"skip", "insert", "tombstone", "replace", "remove", "mark-deleted", "revive"}
	if int(s) < len(names) {
		return names[s]
	}
	return "step(" + strconv.Itoa(int(s)) + ")"
}

// decide is the fence rule for writing op (body nil: a delete) at pos over st.
func decide(st docState, upsert bool, pos batch.Position, src string) (step, error) {
	if st.fenced {
		newer, err := st.fence.newer(pos, src)
		if err != nil || newer {
			return stepSkip, err
		}
	}
	switch {
	case !st.exists && upsert:
		return stepInsert, nil
	case !st.exists:
		return stepTombstone, nil
	case !st.deleted && upsert:
		return stepReplace, nil
	case !st.deleted:
		return stepRemove, nil
	case upsert:
		return stepRevive, nil
	}
	return stepMarkDeleted, nil
}

// reviveSupported reports whether the bucket's server can revive a tombstone by
// compare-and-swap (subdoc ReviveDocument, Couchbase Server 7.1 and later).
func reviveSupported(b *gocb.Bucket) bool {
	agent, err := b.Internal().IORouter()
	if err != nil || agent == nil {
		return false
	}
	return agent.Internal().BucketCapabilityStatus(gocbcore.BucketCapabilityReviveDocument) == gocbcore.CapabilityStatusSupported
}

// fenceRead reads the fence, the CAS and the deleted flag of key, tombstones included.
func (s *Sink) fenceRead(ctx context.Context, col *gocb.Collection, key string) (docState, error) {
	opts := &gocb.LookupInOptions{Context: ctx, Timeout: s.cfg.Timeout.D()}
	opts.Internal.DocFlags = gocb.SubdocDocFlagAccessDeleted
	res, err := col.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec(fenceXattr, &gocb.GetSpecOptions{IsXattr: true}),
		gocb.GetSpec("$document.deleted", &gocb.GetSpecOptions{IsXattr: true}),
	}, opts)
	if errors.Is(err, gocb.ErrDocumentNotFound) {
		return docState{}, nil
	}
	if err != nil {
		return docState{}, err
	}
	st := docState{exists: true, cas: res.Cas()}
	if err := res.ContentAt(1, &st.deleted); err != nil {
		return docState{}, fmt.Errorf("reading whether it is deleted: %w", err)
	}
	switch err := res.ContentAt(0, &st.fence); {
	case err == nil:
		st.xattr, st.fenced = true, st.fence.Pos != ""
	case !errors.Is(err, gocb.ErrPathNotFound):
		return docState{}, fmt.Errorf("reading its %s extended attribute: %w", fenceXattr, err)
	}
	return st, nil
}

// creates reports whether step next over st makes a live document of a key that key index ix
// may not list yet, so the key must be indexed before the write (see the package doc).
func creates(st docState, next step, ix string) bool {
	return next == stepInsert || next == stepRevive && (ix == "" || st.fence.Ix != ix)
}

// fenceWrite writes op at pos by the fence rule from st, the state fenceRead found and decide
// judged: write by compare-and-swap, and read and decide again when another writer changed the
// document in between. A decision made again that would create a document the key index does
// not list (indexed false) is a transient error: the batch's retry indexes it first.
func (s *Sink) fenceWrite(ctx context.Context, col *gocb.Collection, op docOp, src, ix string, st docState, next step, indexed bool) error {
	for range maxFenceRounds {
		if next == stepSkip {
			return nil
		}
		err := s.fenceStep(ctx, col, op, src, ix, st, next)
		if !raced(err) {
			return err
		}
		if st, err = s.fenceRead(ctx, col, op.key); err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if next, err = decide(st, op.body != nil, op.pos, src); err != nil {
			return err
		}
		if !indexed && creates(st, next, ix) {
			return fmt.Errorf("another writer changed it while this one wrote it, and it now needs to be in " +
				"the key index first (two attempts of the table running at once?); retrying indexes it")
		}
	}
	return fmt.Errorf("another writer changed it %d times while this one tried to write it "+
		"(two attempts of the table running at once?); retrying reads it again", maxFenceRounds)
}

// raced reports whether a fenced write failed because the document changed since it was read.
func raced(err error) bool {
	return errors.Is(err, gocb.ErrCasMismatch) || errors.Is(err, gocb.ErrDocumentExists) ||
		errors.Is(err, gocb.ErrDocumentNotFound) || errors.Is(err, gocb.ErrPathNotFound) ||
		errors.Is(err, gocb.ErrPathExists)
}

// fenceStep performs one decided write.
func (s *Sink) fenceStep(ctx context.Context, col *gocb.Collection, op docOp, src, ix string, st docState, next step) error {
	f := newFence(op.pos.String(), src)
	switch next {
	case stepTombstone:
	case stepMarkDeleted:
		f.Ix = st.fence.Ix
	default: // the key was indexed before this write (creates), or is live, so indexed already
		f.Ix = ix
	}
	xattr := &gocb.UpsertSpecOptions{IsXattr: true}
	opts := &gocb.MutateInOptions{DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx, Cas: st.cas}
	var specs []gocb.MutateInSpec
	switch next {
	case stepInsert, stepTombstone:
		// Insert fails when a document or (on Couchbase Server) a tombstone exists by now;
		// InsertSpec fails on gocaves, which inserts over a tombstone, when that one is fenced.
		opts.Cas, opts.StoreSemantic = 0, gocb.StoreSemanticsInsert
		opts.Internal.DocFlags = gocb.SubdocDocFlagAccessDeleted
		specs = []gocb.MutateInSpec{gocb.InsertSpec(fenceXattr, f, &gocb.InsertSpecOptions{IsXattr: true, CreatePath: true})}
		if next == stepTombstone {
			opts.Internal.DocFlags |= gocb.SubdocDocFlagCreateAsDeleted
		} else {
			specs = append(specs, gocb.ReplaceSpec("", json.RawMessage(op.body), nil))
		}
	case stepReplace:
		specs = []gocb.MutateInSpec{gocb.UpsertSpec(fenceXattr, f, xattr), gocb.ReplaceSpec("", json.RawMessage(op.body), nil)}
	case stepRemove:
		specs = []gocb.MutateInSpec{gocb.UpsertSpec(fenceXattr, f, xattr), gocb.RemoveSpec("", nil)}
	case stepMarkDeleted:
		opts.Internal.DocFlags = gocb.SubdocDocFlagAccessDeleted
		specs = []gocb.MutateInSpec{gocb.UpsertSpec(fenceXattr, f, xattr)}
	case stepRevive:
		specs = s.reviveSpecs(st, f, op.body, opts)
	}
	_, err := col.MutateIn(op.key, specs, opts)
	return err
}

// reviveSpecs returns the mutation that brings the tombstone st back as body, and sets opts for
// it. With ReviveDocument (Couchbase Server 7.1+) it is a compare-and-swap on the tombstone. A
// server without it (gocaves) ignores the CAS of a body write on a tombstone, and revives one
// through an insert; there the mutation first removes the write tag read with the tombstone's
// fence (or inserts the fence when it had no attribute), so it fails if any write came in between.
func (s *Sink) reviveSpecs(st docState, f fence, body []byte, opts *gocb.MutateInOptions) []gocb.MutateInSpec {
	var specs []gocb.MutateInSpec
	if st.xattr {
		for tag := range st.fence.W {
			specs = append(specs, gocb.RemoveSpec(fenceXattr+".w."+tag, &gocb.RemoveSpecOptions{IsXattr: true}))
		}
		specs = append(specs, gocb.UpsertSpec(fenceXattr, f, &gocb.UpsertSpecOptions{IsXattr: true}))
	} else {
		specs = append(specs, gocb.InsertSpec(fenceXattr, f, &gocb.InsertSpecOptions{IsXattr: true, CreatePath: true}))
	}
	specs = append(specs, gocb.ReplaceSpec("", json.RawMessage(body), nil))
	if s.revive {
		opts.Internal.DocFlags = gocb.SubdocDocFlagAccessDeleted | gocb.SubdocDocFlag(memd.SubdocDocFlagReviveDocument)
		return specs
	}
	opts.Cas, opts.StoreSemantic = 0, gocb.StoreSemanticsInsert
	return specs
}
