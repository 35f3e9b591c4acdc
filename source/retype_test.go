package source

import (
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

func TestWidens(t *testing.T) {
	t.Parallel()
	num := func(p, s int32) int32 { return (p<<16 | s) + 4 }
	tests := []struct {
		name     string
		old, new batch.Column
		want     bool
	}{
		{"int to bigint", batch.Column{TypeOID: oidInt4}, batch.Column{TypeOID: oidInt8}, true},
		{"smallint to int", batch.Column{TypeOID: oidInt2}, batch.Column{TypeOID: oidInt4}, true},
		{"bigint to int", batch.Column{TypeOID: oidInt8}, batch.Column{TypeOID: oidInt4}, false},
		{"varchar(10) to text", batch.Column{TypeOID: oidVarchar, TypeMod: 14}, batch.Column{TypeOID: oidText, TypeMod: -1}, true},
		{"varchar(10) to varchar(20)", batch.Column{TypeOID: oidVarchar, TypeMod: 14}, batch.Column{TypeOID: oidVarchar, TypeMod: 24}, true},
		{"varchar(20) to varchar(10)", batch.Column{TypeOID: oidVarchar, TypeMod: 24}, batch.Column{TypeOID: oidVarchar, TypeMod: 14}, false},
		{"numeric(10,2) to numeric(12,2)", batch.Column{TypeOID: oidNumeric, TypeMod: num(10, 2)}, batch.Column{TypeOID: oidNumeric, TypeMod: num(12, 2)}, true},
		{"numeric(10,2) to numeric(12,3)", batch.Column{TypeOID: oidNumeric, TypeMod: num(10, 2)}, batch.Column{TypeOID: oidNumeric, TypeMod: num(12, 3)}, false},
		{"numeric(10,2) to numeric", batch.Column{TypeOID: oidNumeric, TypeMod: num(10, 2)}, batch.Column{TypeOID: oidNumeric, TypeMod: -1}, true},
		{"float4 to float8", batch.Column{TypeOID: oidFloat4}, batch.Column{TypeOID: oidFloat8}, true},
		{"text to int", batch.Column{TypeOID: oidText, TypeMod: -1}, batch.Column{TypeOID: oidInt4, TypeMod: -1}, false},
		{"int to text", batch.Column{TypeOID: oidInt4, TypeMod: -1}, batch.Column{TypeOID: oidText, TypeMod: -1}, false},
		{"int[] to bigint[]", batch.Column{TypeOID: 1007, ElemOID: oidInt4, Dims: 1}, batch.Column{TypeOID: 1016, ElemOID: oidInt8, Dims: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Widens(tt.old, tt.new); got != tt.want {
				t.Errorf("Widens(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
