package iceberg

import (
	"github.com/apache/iceberg-go"
)

// promotable reports whether Iceberg's schema evolution turns a column of type have into want
// in place, every value kept (the spec's type promotions): int → long, float → double,
// decimal(p, s) → decimal(q ≥ p, s). A source column widened in Postgres (source.Widens) is
// followed this way; any other type change stays poison.
func promotable(have, want iceberg.Type) bool {
	switch h := have.(type) {
	case iceberg.Int32Type:
		_, ok := want.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := want.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		w, ok := want.(iceberg.DecimalType)
		return ok && w.Scale() == h.Scale() && w.Precision() > h.Precision()
	}
	return false
}

// promotions returns the columns of l whose type in have is promotable to the layout's.
func (l layout) promotions(have *iceberg.Schema) ([]outCol, error) {
	want, err := l.icebergSchema()
	if err != nil {
		return nil, err
	}
	var out []outCol
	for i, c := range l.cols {
		if f, ok := have.FindFieldByName(c.name); ok && promotable(f.Type, want.Field(i).Type) {
			out = append(out, c)
		}
	}
	return out, nil
}
