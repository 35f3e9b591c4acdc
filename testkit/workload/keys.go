package workload

import (
	"math/rand/v2"
	"strings"
)

// Key is a row's primary key: the canonical text of each key column, in table order.
type Key []string

// String is the key as reports print it and checkers index it: the parts joined by "|".
func (k Key) String() string { return strings.Join(k, "|") }

// keySet is a set of keys with uniform random choice.
type keySet struct {
	keys  []Key
	index map[string]int
}

func newKeySet() *keySet { return &keySet{index: map[string]int{}} }

func (s *keySet) len() int { return len(s.keys) }

func (s *keySet) has(k Key) bool { _, ok := s.index[k.String()]; return ok }

func (s *keySet) add(k Key) {
	if s.has(k) {
		return
	}
	s.index[k.String()] = len(s.keys)
	s.keys = append(s.keys, k)
}

func (s *keySet) remove(k Key) {
	i, ok := s.index[k.String()]
	if !ok {
		return
	}
	last := len(s.keys) - 1
	s.keys[i] = s.keys[last]
	s.index[s.keys[i].String()] = i
	s.keys = s.keys[:last]
	delete(s.index, k.String())
}

// pick returns a random key; the set must not be empty.
func (s *keySet) pick(rng *rand.Rand) Key { return s.keys[rng.IntN(len(s.keys))] }

// all returns a copy of the keys.
func (s *keySet) all() []Key { return append([]Key(nil), s.keys...) }
