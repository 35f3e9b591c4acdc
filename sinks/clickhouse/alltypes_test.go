package clickhouse

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// The all-types table of the Native encoding tests: every scalar type of the batch mapping as a
// key, a Nullable column and an array, with generated values.

// genValue returns the Postgres text of one value of a column for row r, within what the layout
// holds; rnd is the column's own source.
type genValue func(rnd *rand.Rand, r int, modern bool) string

// typeCase is one Postgres type of the all-types table, with its values.
type typeCase struct {
	name    string
	oid     uint32
	typName string
	typMod  int32
	gen     genValue
}

func numericMod(p, s int32) int32 { return (p<<16 | s) + 4 }

// digits returns n random decimal digits.
func digits(rnd *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + rnd.IntN(10))
	}
	return string(b)
}

// decimalText returns a decimal with up to p-s integer digits and s fraction digits, the
// extremes on some rows.
func decimalText(p, s int) genValue {
	return func(rnd *rand.Rand, r int, _ bool) string {
		intDigits := strings.Repeat("9", p-s)
		frac := strings.Repeat("9", s)
		switch r % 13 {
		case 1:
		case 2:
			intDigits, frac = "0", strings.Repeat("0", s)
		default:
			intDigits, frac = digits(rnd, 1+rnd.IntN(p-s)), digits(rnd, s)
		}
		v := intDigits
		if s > 0 {
			v += "." + frac
		}
		if rnd.IntN(2) == 0 {
			v = "-" + v
		}
		return v
	}
}

func intText(lo, hi int64) genValue {
	return func(rnd *rand.Rand, r int, _ bool) string {
		switch r % 17 {
		case 1:
			return strconv.FormatInt(lo, 10)
		case 2:
			return strconv.FormatInt(hi, 10)
		}
		return strconv.FormatInt(lo+int64(rnd.Uint64N(uint64(hi-lo))), 10)
	}
}

func floatText(bits int) genValue {
	return func(rnd *rand.Rand, r int, _ bool) string {
		switch r % 19 {
		case 1:
			return "NaN"
		case 2:
			return "Infinity"
		case 3:
			return "-Infinity"
		case 4:
			return "-0"
		}
		return strconv.FormatFloat((rnd.Float64()-0.5)*1e6, 'g', -1, bits)
	}
}

// strText returns text of 0 to 300 bytes (lengths past 127 take two bytes in Native), some not ASCII.
func strText(rnd *rand.Rand, r int, _ bool) string {
	switch r % 11 {
	case 1:
		return ""
	case 2:
		return "ünïcödé ✓ " + digits(rnd, 3)
	}
	return strings.Repeat("x", rnd.IntN(300)) + digits(rnd, 2)
}

func byteaText(rnd *rand.Rand, r int, _ bool) string {
	b := make([]byte, rnd.IntN(200))
	for i := range b {
		b[i] = byte(rnd.IntN(256))
	}
	return fmt.Sprintf(`\x%x`, b)
}

func uuidText(rnd *rand.Rand, r int, _ bool) string {
	switch r % 23 {
	case 1:
		return "00000000-0000-0000-0000-000000000000"
	case 2:
		return "ffffffff-ffff-ffff-ffff-ffffffffffff"
	}
	h := fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64())
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// dateText returns a date the layout's date type holds, its bounds on some rows.
func dateText(rnd *rand.Rand, r int, modern bool) string {
	lo, hi := dateBounds(modern)
	d := lo + rnd.Int64N(hi-lo+1)
	switch r % 29 {
	case 1:
		d = lo
	case 2:
		d = hi
	}
	return time.Unix(d*86400, 0).UTC().Format("2006-01-02")
}

// timestampText returns a timestamp the layout's type holds, its bounds on some rows.
func timestampText(zone string) genValue {
	return func(rnd *rand.Rand, r int, modern bool) string {
		lo, hi := timestampBounds(modern)
		us := lo + rnd.Int64N(hi-lo+1)
		switch r % 31 {
		case 1:
			us = lo
		case 2:
			us = hi
		}
		return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.999999") + zone
	}
}

func timeText(rnd *rand.Rand, r int, _ bool) string {
	us := rnd.Int64N(86400 * 1e6)
	switch r % 37 {
	case 1:
		us = 0
	case 2:
		us = 86400*1e6 - 1
	case 3:
		us -= us % 1e6
	}
	return string(batch.AppendTime(nil, us))
}

func intervalText(rnd *rand.Rand, r int, _ bool) string {
	us := rnd.Int64N(100*86400*1e6) - 50*86400*1e6
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	s := us / 1e6
	return fmt.Sprintf("%d mons %d days %s%d:%02d:%02d.%06d", rnd.IntN(400)-200, rnd.IntN(80)-40, sign, s/3600, s/60%60, s%60, us%1e6)
}

func boolText(rnd *rand.Rand, r int, _ bool) string { return [...]string{"f", "t"}[rnd.IntN(2)] }

// scalarCases are the scalar types of the batch mapping, with each decimal width.
var scalarCases = []typeCase{
	{"small", 21, "smallint", -1, intText(-32768, 32767)},
	{"int", 23, "integer", -1, intText(-2147483648, 2147483647)},
	{"big", 20, "bigint", -1, intText(-1<<63, 1<<63-1)},
	{"real", 700, "real", -1, floatText(32)},
	{"double", 701, "double precision", -1, floatText(64)},
	{"dec32", 1700, "numeric(9,2)", numericMod(9, 2), decimalText(9, 2)},
	{"dec64", 1700, "numeric(18,4)", numericMod(18, 4), decimalText(18, 4)},
	{"dec128", 1700, "numeric(38,6)", numericMod(38, 6), decimalText(38, 6)},
	{"numtext", 1700, "numeric", -1, decimalText(30, 8)},
	{"ok", 16, "boolean", -1, boolText},
	{"txt", 25, "text", -1, strText},
	{"blob", 17, "bytea", -1, byteaText},
	{"uid", 2950, "uuid", -1, uuidText},
	{"day", 1082, "date", -1, dateText},
	{"ts", 1114, "timestamp without time zone", -1, timestampText("")},
	{"tstz", 1184, "timestamp with time zone", -1, timestampText("+00")},
	{"clock", 1083, "time without time zone", -1, timeText},
	{"span", 1186, "interval", -1, intervalText},
}

// arrayOIDs are the array types of the scalar cases (numeric arrays keep the typmod).
var arrayOIDs = map[uint32]uint32{21: 1005, 23: 1007, 20: 1016, 700: 1021, 701: 1022, 1700: 1231, 16: 1000, 25: 1009,
	17: 1001, 2950: 2951, 1082: 1182, 1114: 1115, 1184: 1185, 1083: 1183, 1186: 1187}

// allTypesSpec is a table with every scalar type as a key column (not Nullable), as a Nullable
// column and as an array, with every context column materialized.
func allTypesSpec() sinks.TableSpec {
	var cols []batch.Column
	for _, k := range []bool{true, false} {
		for _, c := range scalarCases {
			name := "n_" + c.name
			if k {
				name = "k_" + c.name
			}
			cols = append(cols, batch.Column{Name: name, TypeOID: c.oid, TypeName: c.typName, TypeMod: c.typMod, Key: k, NotNull: k})
		}
	}
	for _, c := range scalarCases {
		cols = append(cols, batch.Column{Name: "a_" + c.name, TypeOID: arrayOIDs[c.oid], TypeName: c.typName + "[]", TypeMod: c.typMod,
			Category: "A", ElemOID: c.oid, Dims: 1})
	}
	var meta []sinks.MetadataColumn
	for _, m := range batch.MetadataNames() {
		meta = append(meta, sinks.MetadataColumn{From: m, As: "m_" + m})
	}
	return sinks.TableSpec{Target: "raw.alltypes", Schema: batch.Schema{Table: batch.TableName{Schema: "shop", Name: "alltypes"}, Columns: cols},
		Metadata: meta}
}

// allTypesSpecFor is allTypesSpec as a layout accepts it: the compatible layout refuses a
// timestamp key (keyHolds), so there its timestamp "key" columns are ordinary (Nullable) ones.
func allTypesSpecFor(modern bool) sinks.TableSpec {
	spec := allTypesSpec()
	for i := range spec.Schema.Columns {
		c := &spec.Schema.Columns[i]
		if !modern && c.Key && (c.TypeOID == 1114 || c.TypeOID == 1184) {
			c.Key = false
		}
	}
	return spec
}

// allTypesChanges returns n changes of allTypesSpec's table: inserts, updates, snapshot reads and
// deletes (the key only), NULLs in every Nullable column, arrays empty, NULL or holding NULLs.
func allTypesChanges(n int, modern bool) []batch.Change {
	rnds := make([]*rand.Rand, len(scalarCases)*3)
	for i := range rnds {
		rnds[i] = rand.New(rand.NewPCG(uint64(i), 42))
	}
	ops := []batch.Op{batch.OpInsert, batch.OpUpdate, batch.OpSnapshot, batch.OpInsert, batch.OpDelete}
	out := make([]batch.Change, n)
	for r := range n {
		op := ops[r%len(ops)]
		c := batch.Change{Op: op, Pos: batch.Position{LSN: 0x16B3748 + uint64(r/3), Seq: uint32(r % 3)}}
		if op != batch.OpSnapshot {
			c.CommitTS = time.Date(2026, 11, 30, 12, 0, r%60, 123456000, time.UTC)
		}
		for i, tc := range scalarCases { // keys
			c.Values = append(c.Values, batch.Value{Text: []byte(tc.gen(rnds[i], r, modern))})
		}
		for i, tc := range scalarCases { // Nullable
			v := batch.Value{Null: op == batch.OpDelete || (r+i)%7 == 0}
			if !v.Null {
				v.Text = []byte(tc.gen(rnds[len(scalarCases)+i], r, modern))
			}
			c.Values = append(c.Values, v)
		}
		for i, tc := range scalarCases { // arrays
			rnd := rnds[2*len(scalarCases)+i]
			if op == batch.OpDelete || (r+i)%9 == 0 {
				c.Values = append(c.Values, batch.Value{Null: true})
				continue
			}
			elems := make([]string, rnd.IntN(5))
			for j := range elems {
				if rnd.IntN(6) == 0 {
					elems[j] = "NULL"
					continue
				}
				elems[j] = arrayElemText(tc.gen(rnd, r+j, modern))
			}
			c.Values = append(c.Values, batch.Value{Text: []byte("{" + strings.Join(elems, ",") + "}")})
		}
		out[r] = c
	}
	return out
}

// arrayElemText quotes an element of a Postgres array literal.
func arrayElemText(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// buildRecord builds the record of changes of spec's table.
func buildRecord(tb testing.TB, spec sinks.TableSpec, changes []batch.Change) arrow.RecordBatch {
	tb.Helper()
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, spec.Schema)
	if err != nil {
		tb.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(changes, time.Date(2026, 12, 5, 3, 0, 0, 987654000, time.UTC))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rec.Release)
	return rec
}
