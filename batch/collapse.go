package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
)

// Collapser applies last-write-wins per key to the changes of one batch. It keeps its hash
// table and buffers between batches, so collapse every batch of a table with one Collapser. It
// is not safe for concurrent use.
type Collapser struct {
	table   TableName
	columns []Column
	keyCols []int // indexes of the key columns

	seed  maphash.Seed
	index map[uint64]int32 // key hash -> first slot with that hash
	slots []slot
	keys  []byte // encoded keys of the slots
	enc   []byte // scratch for encoding one key
	out   []Change

	in   []Change // the changes of the Collapse running (nil between calls)
	dels []Change // deletes of old keys made by key-changing updates, during a Collapse
}

// slot is the state of one key in the batch: 32 bytes, so a batch's slots cost a third of its
// changes, not more than them (a slot used to carry a copy of its Change).
type slot struct {
	keyStart, keyEnd int
	next             int32 // next slot with the same hash, -1 at the end
	row              int32 // the key's row: an index of in, -(index of dels)-1, or noRow
	last             int   // order of the last change that touched the key
}

// noRow is the row of a slot that holds none yet.
const noRow = math.MinInt32

// rowOf returns the row s holds, nil when none.
func (c *Collapser) rowOf(s *slot) *Change {
	switch {
	case s.row == noRow:
		return nil
	case s.row < 0:
		return &c.dels[-s.row-1]
	}
	return &c.in[s.row]
}

// NewCollapser returns a Collapser for schema, which must have at least one key column.
func NewCollapser(schema Schema) (*Collapser, error) {
	c := &Collapser{table: schema.Table, columns: schema.Columns, seed: maphash.MakeSeed(), index: map[uint64]int32{}}
	for i, col := range schema.Columns {
		if col.Key {
			c.keyCols = append(c.keyCols, i)
		}
	}
	if len(c.keyCols) == 0 {
		return nil, fmt.Errorf("collapsing %s: the table has no key column: give it a primary key or configure its key", schema.Table)
	}
	return c, nil
}

// Collapse returns one change per key, the result of the changes (in arrival order) for that
// key, ordered by the arrival of the last change that touched each key:
//
//   - the last operation per key wins: insert, update and snapshot-read give their image (with
//     their Op and Pos), delete gives a delete carrying the key with the other columns NULL
//     (insert->update->delete->insert gives the insert's image);
//   - an update whose OldKey differs from its new key is a delete of the old key and an upsert of
//     the new one, both at the update's position;
//   - an Unchanged (TOAST) value takes the value of the earlier image of the same row in the batch
//     (for a key-changing update, the image of the old key) and stays Unchanged when there is
//     none: the source resolves the rest before building the record.
//
// Keys compare by their text form. Collapse rewrites the changes' Values in place (the Cut owns
// them). The returned slice is reused by the next call.
func (c *Collapser) Collapse(changes []Change) ([]Change, error) {
	if len(changes) > math.MaxInt32 {
		return nil, fmt.Errorf("collapsing %s: %d changes in one batch, at most %d", c.table, len(changes), math.MaxInt32)
	}
	clear(c.index)
	clear(c.dels)
	c.slots, c.keys, c.out, c.dels = c.slots[:0], c.keys[:0], c.out[:0], c.dels[:0]
	c.in = changes
	defer func() { c.in = nil }()
	order := 0
	for i := range changes {
		ch := &changes[i]
		if len(ch.Values) != len(c.columns) {
			return nil, fmt.Errorf("collapsing %s: change at %s has %d values, the table has %d columns",
				c.table, ch.Pos, len(ch.Values), len(c.columns))
		}
		if ch.OldKey != nil {
			if len(ch.OldKey) != len(c.columns) {
				return nil, fmt.Errorf("collapsing %s: change at %s has an old key of %d values, the table has %d columns",
					c.table, ch.Pos, len(ch.OldKey), len(c.columns))
			}
			if err := c.keyChange(ch, order); err != nil {
				return nil, err
			}
			order++
		}
		s, err := c.slotFor(ch.Values, ch.Pos)
		if err != nil {
			return nil, err
		}
		if ch.Op == OpDelete {
			c.keyOnly(ch.Values)
		} else if prev := c.rowOf(s); prev != nil && prev.Op != OpDelete {
			mergeUnchanged(ch.Values, prev.Values)
		}
		s.row = int32(i)
		s.last = order
		order++
	}
	return c.emit(), nil
}

// keyChange handles the old key of an update: when it differs from the new key, unchanged
// values come from the old key's image and the old key gets a delete at the update's position.
func (c *Collapser) keyChange(ch *Change, order int) error {
	if _, err := c.encodeKey(ch.OldKey, ch.Pos, true); err != nil {
		return err
	}
	if c.sameKey(ch.OldKey, ch.Values) {
		ch.OldKey = nil // the key did not change
		return nil
	}
	s, err := c.slotFor(ch.OldKey, ch.Pos)
	if err != nil {
		return err
	}
	if prev := c.rowOf(s); prev != nil && prev.Op != OpDelete {
		mergeUnchanged(ch.Values, prev.Values)
	}
	del := make([]Value, len(c.columns))
	for i := range del {
		del[i] = Value{Null: true}
	}
	for _, k := range c.keyCols {
		del[k] = ch.OldKey[k]
	}
	c.dels = append(c.dels, Change{Op: OpDelete, Pos: ch.Pos, CommitTS: ch.CommitTS, Values: del})
	s.row = -int32(len(c.dels))
	s.last = order
	return nil
}

// sameKey reports whether a and b have the same key values (by text).
func (c *Collapser) sameKey(a, b []Value) bool {
	for _, k := range c.keyCols {
		if a[k].Null != b[k].Null || (!a[k].Null && !bytes.Equal(a[k].Text, b[k].Text)) {
			return false
		}
	}
	return true
}

// mergeUnchanged replaces Unchanged values of v with the values of the earlier image prev.
func mergeUnchanged(v, prev []Value) {
	for j := range v {
		if v[j].Unchanged && !prev[j].Unchanged {
			v[j] = prev[j]
		}
	}
}

// keyOnly sets the non-key values of a delete to NULL.
func (c *Collapser) keyOnly(v []Value) {
	k := 0
	for j := range v {
		if k < len(c.keyCols) && c.keyCols[k] == j {
			k++
			continue
		}
		v[j] = Value{Null: true}
	}
}

// encodeKey encodes the key columns of v into c.enc: for each, a tag (NULL or not), the
// length and the text. Unchanged key values are an error.
func (c *Collapser) encodeKey(v []Value, pos Position, old bool) ([]byte, error) {
	c.enc = c.enc[:0]
	for _, k := range c.keyCols {
		val := &v[k]
		if val.Unchanged {
			which := "new row"
			if old {
				which = "old key"
			}
			return nil, fmt.Errorf("collapsing %s: change at %s: key column %q of the %s is an unchanged TOAST value: "+
				"set REPLICA IDENTITY FULL on the table or use a key without large values",
				c.table, pos, c.columns[k].Name, which)
		}
		if val.Null {
			c.enc = append(c.enc, 0)
			continue
		}
		c.enc = append(c.enc, 1)
		c.enc = binary.AppendUvarint(c.enc, uint64(len(val.Text)))
		c.enc = append(c.enc, val.Text...)
	}
	return c.enc, nil
}

// slotFor returns the slot of the key of v, adding an empty one when the key is new.
func (c *Collapser) slotFor(v []Value, pos Position) (*slot, error) {
	key, err := c.encodeKey(v, pos, false)
	if err != nil {
		return nil, err
	}
	h := maphash.Bytes(c.seed, key)
	first, ok := c.index[h]
	if ok {
		for i := first; i >= 0; i = c.slots[i].next {
			s := &c.slots[i]
			if bytes.Equal(c.keys[s.keyStart:s.keyEnd], key) {
				return s, nil
			}
		}
	} else {
		first = -1
	}
	start := len(c.keys)
	c.keys = append(c.keys, key...)
	c.slots = append(c.slots, slot{keyStart: start, keyEnd: len(c.keys), next: first, row: noRow})
	c.index[h] = int32(len(c.slots) - 1)
	return &c.slots[len(c.slots)-1], nil
}

// Clear drops the rows of the last Collapse result, which must not be used afterwards, so
// that the batch's values can be collected before the next Collapse reuses the slice.
func (c *Collapser) Clear() {
	clear(c.out)
	c.out = c.out[:0]
}

// emit returns the rows of the slots in the order of their last change.
func (c *Collapser) emit() []Change {
	slices.SortFunc(c.slots, func(a, b slot) int { return a.last - b.last })
	for i := range c.slots {
		row := *c.rowOf(&c.slots[i])
		row.OldKey = nil // applied: a key change is a delete of the old key and this upsert
		c.out = append(c.out, row)
	}
	clear(c.dels) // do not keep the batch's values alive
	c.dels = c.dels[:0]
	return c.out
}
