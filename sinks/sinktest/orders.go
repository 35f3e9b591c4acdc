package sinktest

import (
	"strconv"

	"github.com/sluicecdc/sluice/batch"
)

// OrdersSchema is shop.orders(id int8 key, name text, qty int4, price numeric(12,2)), the table
// the sinks' own tests write; each sink's tests add the metadata columns they check.
func OrdersSchema() batch.Schema {
	return batch.Schema{
		Table: batch.TableName{Schema: "shop", Name: "orders"},
		Columns: []batch.Column{
			{Name: "id", TypeOID: 20, TypeName: "bigint", NotNull: true, Key: true},
			{Name: "name", TypeOID: 25, TypeName: "text"},
			{Name: "qty", TypeOID: 23, TypeName: "integer"},
			{Name: "price", TypeOID: 1700, TypeName: "numeric(12,2)", TypeMod: (12<<16 | 2) + 4},
		},
	}
}

// OrderChange is a change of an OrdersSchema row with op; price is qty + 0.50. Positions are the
// caller's to set.
func OrderChange(op batch.Op, id int64, name string, qty int) batch.Change {
	return batch.Change{Op: op, Values: []batch.Value{
		text(strconv.FormatInt(id, 10)), text(name), text(strconv.Itoa(qty)), text(strconv.Itoa(qty) + ".50"),
	}}
}

// OrderDelete is a delete of the OrdersSchema row id (the key, other columns NULL).
func OrderDelete(id int64) batch.Change {
	null := batch.Value{Null: true}
	return batch.Change{Op: batch.OpDelete, Values: []batch.Value{text(strconv.FormatInt(id, 10)), null, null, null}}
}
