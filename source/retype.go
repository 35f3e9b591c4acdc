package source

import "github.com/sluicecdc/sluice/batch"

// Postgres type OIDs the widening rule knows.
const (
	oidInt2    = 21
	oidInt4    = 23
	oidInt8    = 20
	oidFloat4  = 700
	oidFloat8  = 701
	oidText    = 25
	oidVarchar = 1043
	oidNumeric = 1700
)

// Widens reports whether a column retyped from old to new keeps every value it held unchanged
// (int2 → int4 → int8, float4 → float8, varchar(n) → varchar(m ≥ n) or text, numeric(p,s) →
// numeric(q ≥ p, s) or unconstrained numeric). Postgres rewrites no value the stream would have
// to carry, so the sink can follow by widening its column. Any other type change (text → int,
// int → text, a smaller size, a scale change) rewrote every existing row's value without a word
// in the WAL: the sink cannot follow it from the stream.
func Widens(old, new batch.Column) bool {
	if old.TypeOID == new.TypeOID && old.TypeMod == new.TypeMod && old.Dims == new.Dims && old.ElemOID == new.ElemOID {
		return true // the same base type (a domain over it added or removed)
	}
	if old.Dims != new.Dims || old.ElemOID != 0 || new.ElemOID != 0 {
		return false
	}
	rank := map[uint32]int{oidInt2: 1, oidInt4: 2, oidInt8: 3}
	switch {
	case rank[old.TypeOID] > 0 && rank[new.TypeOID] > 0:
		return rank[new.TypeOID] >= rank[old.TypeOID]
	case old.TypeOID == oidFloat4 && (new.TypeOID == oidFloat4 || new.TypeOID == oidFloat8):
		return true
	case old.TypeOID == oidVarchar && new.TypeOID == oidText:
		return true
	case old.TypeOID == oidVarchar && new.TypeOID == oidVarchar:
		return new.TypeMod < 0 || (old.TypeMod >= 0 && new.TypeMod >= old.TypeMod)
	case old.TypeOID == oidNumeric && new.TypeOID == oidNumeric:
		if new.TypeMod < 0 {
			return true
		}
		if old.TypeMod < 0 {
			return false
		}
		// typmod is ((precision << 16) | scale) + 4
		op, os := (old.TypeMod-4)>>16, (old.TypeMod-4)&0xffff
		np, ns := (new.TypeMod-4)>>16, (new.TypeMod-4)&0xffff
		return ns == os && np >= op
	}
	return false
}
