package batch

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// Field metadata keys that ArrowSchema sets on every data field.
const (
	// MetaPGType holds the Postgres type name (Column.TypeName, e.g. numeric(12,2)).
	MetaPGType = "sluice.pg_type"
	// MetaKey is "true" for a column of the key, "false" otherwise.
	MetaKey = "sluice.key"
	// MetaNotNull is "true" for a column declared NOT NULL in Postgres. Data fields are
	// nullable in Arrow whatever this says (delete rows carry only the key); key fields are not.
	MetaNotNull = "sluice.not_null"
)

// maxDecimal128Precision is the largest precision decimal128 holds.
const maxDecimal128Precision = 38

// Built-in Postgres type OIDs the mapping knows (pg_type.oid, stable across versions).
const (
	oidBool        = 16
	oidBytea       = 17
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt2Vector  = 22
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidOIDVector   = 30
	oidJSON        = 114
	oidCIDR        = 650
	oidFloat4      = 700
	oidFloat8      = 701
	oidInet        = 869
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// arrayElem maps built-in array type OIDs to their element OIDs.
func arrayElem(oid uint32) (uint32, bool) {
	switch oid {
	case 1000:
		return oidBool, true
	case 1001:
		return oidBytea, true
	case 1003:
		return oidName, true
	case 1016:
		return oidInt8, true
	case 1005:
		return oidInt2, true
	case 1007:
		return oidInt4, true
	case 1009:
		return oidText, true
	case 199:
		return oidJSON, true
	case 651:
		return oidCIDR, true
	case 1021:
		return oidFloat4, true
	case 1022:
		return oidFloat8, true
	case 1041:
		return oidInet, true
	case 1014:
		return oidBPChar, true
	case 1015:
		return oidVarchar, true
	case 1182:
		return oidDate, true
	case 1183:
		return oidTime, true
	case 1115:
		return oidTimestamp, true
	case 1185:
		return oidTimestamptz, true
	case 1187:
		return oidInterval, true
	case 1231:
		return oidNumeric, true
	case 2951:
		return oidUUID, true
	case 3807:
		return oidJSONB, true
	case 1028:
		return oidOID, true
	}
	return 0, false
}

// kind is how a scalar Postgres value is parsed and which Arrow type holds it.
type kind uint8

const (
	kindInvalid     kind = iota
	kindBool             // bool
	kindInt16            // int16
	kindInt32            // int32
	kindInt64            // int64
	kindFloat32          // float32
	kindFloat64          // float64
	kindDecimal          // decimal128(p,s)
	kindNumericText      // utf8, the exact decimal text
	kindText             // utf8, the text as is
	kindBytea            // binary
	kindDate             // date32
	kindTime             // time64[us]
	kindTimestamp        // timestamp[us]
	kindTimestamptz      // timestamp[us, UTC]
	kindUUID             // arrow.uuid extension
	kindInterval         // month_day_nano_interval
	kindOID              // int64, from an unsigned 32-bit oid
)

// scalarType is a scalar Postgres type resolved for the mapping.
type scalarType struct {
	kind      kind
	precision int32 // decimal128 only
	scale     int32 // decimal128 only
	// textSend says how a kindText type's binary form (its send function) relates to the text
	// it prints; textSendNone for every type whose binary form is its own encoding.
	textSend textSend
}

// textSend is how the binary form of a kindText type holds its printed text.
type textSend uint8

const (
	textSendNone  textSend = iota // a binary form of its own: read as text
	textSendRaw                   // the printed text as is (text, varchar, bpchar, name, json)
	textSendJSONB                 // a version byte (1), then the printed text (jsonb)
)

// colType is a column's resolved type: a scalar, or a one-dimensional array of a scalar.
type colType struct {
	list bool
	elem scalarType
}

// resolveScalar maps a non-array type to its kind. typmod is the column's atttypmod. Every type
// without a native mapping (enums, extension types such as citext, hstore or PostGIS geometry,
// money, timetz, bit strings, ranges, composites, ...) is kindText: the exact text Postgres
// prints for it, which is what pgoutput sends and what the snapshot reads.
func resolveScalar(oid uint32, typmod int32) scalarType {
	switch oid {
	case oidBool:
		return scalarType{kind: kindBool}
	case oidInt2:
		return scalarType{kind: kindInt16}
	case oidInt4:
		return scalarType{kind: kindInt32}
	case oidInt8:
		return scalarType{kind: kindInt64}
	case oidOID:
		return scalarType{kind: kindOID}
	case oidFloat4:
		return scalarType{kind: kindFloat32}
	case oidFloat8:
		return scalarType{kind: kindFloat64}
	case oidNumeric:
		return resolveNumeric(typmod)
	case oidBytea:
		return scalarType{kind: kindBytea}
	case oidDate:
		return scalarType{kind: kindDate}
	case oidTime:
		return scalarType{kind: kindTime}
	case oidTimestamp:
		return scalarType{kind: kindTimestamp}
	case oidTimestamptz:
		return scalarType{kind: kindTimestamptz}
	case oidUUID:
		return scalarType{kind: kindUUID}
	case oidInterval:
		return scalarType{kind: kindInterval}
	case oidText, oidVarchar, oidBPChar, oidName, oidJSON:
		return scalarType{kind: kindText, textSend: textSendRaw}
	case oidJSONB:
		return scalarType{kind: kindText, textSend: textSendJSONB}
	}
	return scalarType{kind: kindText}
}

// resolveNumeric maps numeric with its typmod. numeric(p,s) holds values with at most p
// significant digits and s digits after the point; Postgres 15 allows s < 0 (rounding to tens,
// hundreds, ...) and s > p (only fractional digits). Such a column maps to the smallest
// decimal128 that holds every value exactly: scale max(s,0), precision p-s when s < 0 and
// max(p,s) otherwise. When that precision exceeds 38, or the column is unconstrained, the
// values go to utf8 holding the exact decimal text Postgres prints (NaN and ±Infinity included).
func resolveNumeric(typmod int32) scalarType {
	if typmod < 4 {
		return scalarType{kind: kindNumericText}
	}
	m := typmod - 4
	p := (m >> 16) & 0xffff
	s := ((m & 0x7ff) ^ 1024) - 1024 // 11-bit two's complement, as numeric_typmod_scale
	prec, scale := max(p, s), s
	if s < 0 {
		prec, scale = p-s, 0
	}
	if prec < 1 || prec > maxDecimal128Precision {
		return scalarType{kind: kindNumericText}
	}
	return scalarType{kind: kindDecimal, precision: prec, scale: scale}
}

// resolveColumn maps a column to its type. Every column maps: a one-dimensional array of any
// element type is a list of the element's mapping; a column declared with more than one array
// dimension, and the vector types int2vector and oidvector (category A, but printed as a
// space-separated list), are carried as their text.
func resolveColumn(col *Column) colType {
	if col.Dims > 1 || col.TypeOID == oidInt2Vector || col.TypeOID == oidOIDVector {
		return colType{elem: scalarType{kind: kindText}}
	}
	if elemOID, ok := arrayElem(col.TypeOID); ok {
		return colType{list: true, elem: resolveScalar(elemOID, col.TypeMod)}
	}
	if col.Category == "A" && col.ElemOID != 0 {
		return colType{list: true, elem: resolveScalar(col.ElemOID, col.TypeMod)}
	}
	return colType{elem: resolveScalar(col.TypeOID, col.TypeMod)}
}

// arrowType returns the Arrow type of a scalar.
func (s scalarType) arrowType() arrow.DataType {
	switch s.kind {
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindInt16:
		return arrow.PrimitiveTypes.Int16
	case kindInt32:
		return arrow.PrimitiveTypes.Int32
	case kindInt64, kindOID:
		return arrow.PrimitiveTypes.Int64
	case kindFloat32:
		return arrow.PrimitiveTypes.Float32
	case kindFloat64:
		return arrow.PrimitiveTypes.Float64
	case kindDecimal:
		return &arrow.Decimal128Type{Precision: s.precision, Scale: s.scale}
	case kindNumericText, kindText:
		return arrow.BinaryTypes.String
	case kindBytea:
		return arrow.BinaryTypes.Binary
	case kindDate:
		return arrow.FixedWidthTypes.Date32
	case kindTime:
		return arrow.FixedWidthTypes.Time64us
	case kindTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case kindTimestamptz:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case kindUUID:
		return extensions.NewUUIDType()
	case kindInterval:
		return arrow.FixedWidthTypes.MonthDayNanoInterval
	}
	panic("batch: arrow type of invalid kind " + strconv.Itoa(int(s.kind)))
}

// ListElementName is the name of the element field of list columns (Iceberg's and Parquet's
// name for it).
const ListElementName = "element"

// arrowType returns the Arrow type of a column.
func (c colType) arrowType() arrow.DataType {
	if c.list {
		return arrow.ListOfField(arrow.Field{Name: ListElementName, Type: c.elem.arrowType(), Nullable: true})
	}
	return c.elem.arrowType()
}

// ArrowSchema maps a table's schema to the Arrow schema of its batches: one field per column in
// Schema order, then the context tail (ContextFields). Each data field carries MetaPGType,
// MetaKey and MetaNotNull; key fields are not nullable, the others are (delete rows carry only
// the key). The mapping, from the text form Postgres prints (docs/types.md has every type and
// its home in each sink):
//
//	int2, int4, int8            int16, int32, int64
//	oid                         int64
//	float4, float8              float32, float64 (NaN and ±Infinity kept)
//	numeric(p,s), p<=38         decimal128(p,s) exactly; NaN/Infinity values are an error
//	numeric, numeric(p>38)      utf8 holding the exact decimal text (NaN, ±Infinity as text)
//	bool                        bool
//	bytea                       binary
//	date                        date32 (BC dates kept; 'infinity' is an error)
//	time                        time64[us]
//	timestamp                   timestamp[us] without zone
//	timestamptz                 timestamp[us, "UTC"]
//	interval                    month_day_nano_interval
//	uuid                        arrow.uuid extension type (fixed_size_binary(16) storage)
//	one-dimensional arrays      list<element> of the element's mapping
//	every other type            utf8 holding the exact text Postgres prints: text types, json(b),
//	                            inet/cidr, enums, citext, hstore, ltree, geometry, money, timetz,
//	                            macaddr, bit strings, xml, tsvector, ranges, composites, ...;
//	                            also columns declared with several array dimensions (int[][])
//
// Domains are mapped as their base type (the source resolves Column.TypeOID through them). No
// column is refused for its type; a column named like a context column is an error.
func ArrowSchema(schema Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(schema.Columns)+NumContextColumns)
	var errs []error
	for i := range schema.Columns {
		col := &schema.Columns[i]
		if _, clash := ContextIndex(0, col.Name); clash {
			errs = append(errs, fmt.Errorf("table %s column %q: the name is taken by a sluice context column: "+
				"rename the column, or leave it out of the publication's column list", schema.Table, col.Name))
			continue
		}
		fields = append(fields, dataField(col, resolveColumn(col)))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	fields = append(fields, ContextFields()...)
	return arrow.NewSchema(fields, nil), nil
}

// dataField returns the Arrow field of a resolved column.
func dataField(col *Column, ct colType) arrow.Field {
	md := arrow.NewMetadata(
		[]string{MetaPGType, MetaKey, MetaNotNull},
		[]string{col.TypeName, strconv.FormatBool(col.Key), strconv.FormatBool(col.NotNull)},
	)
	return arrow.Field{Name: col.Name, Type: ct.arrowType(), Nullable: !col.Key, Metadata: md}
}

// FirstKeyInteger reports whether the first key column of s is an integer (int2, int4 or int8,
// or a domain over one), so that a snapshot can split the table into ranges of it.
func (s Schema) FirstKeyInteger() bool {
	keys := s.KeyIndexes()
	if len(keys) == 0 {
		return false
	}
	c := &s.Columns[keys[0]]
	if c.Dims > 0 {
		return false
	}
	switch c.TypeOID {
	case oidInt2, oidInt4, oidInt8:
		return true
	}
	return false
}
