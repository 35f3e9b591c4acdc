package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// rawDecoder is implemented (on the pointer) by setting types with a syntax of their own, such as
// sizes and durations. decodeRaw gets the value as YAML or JSON decoding produced it.
type rawDecoder interface {
	decodeRaw(v any) error
}

var rawDecoderType = reflect.TypeFor[rawDecoder]()

// decoder turns a generic tree (maps, lists and scalars from YAML, JSON or the environment)
// into the typed config. Unlike a decoder that stops at the first error, it records every
// problem with its key path and keeps going, and it remembers which keys were present, so that
// validation can tell an explicit 0 from an absent key.
type decoder struct {
	ps      *problems
	present map[string]bool
}

// newDecoder returns a decoder whose problems name the environment variables in origins.
func newDecoder(origins map[string]string) *decoder {
	return &decoder{
		ps:      &problems{skip: map[string]bool{}, origins: origins},
		present: map[string]bool{},
	}
}

// fail records a problem at path and marks path so that validation adds no derived problem.
func (d *decoder) fail(path, format string, args ...any) {
	d.ps.add(path, format, args...)
	d.ps.skip[path] = true
}

// joinKey returns the path of key inside the object at path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodeRoot decodes the top-level object into c.
func (d *decoder) decodeRoot(raw any, c *Config) {
	if raw == nil {
		raw = map[string]any{}
	}
	d.value("", raw, reflect.ValueOf(c).Elem())
}

// value decodes raw into out. A null value counts as absent.
func (d *decoder) value(path string, raw any, out reflect.Value) {
	if raw == nil {
		return
	}
	d.present[path] = true
	if reflect.PointerTo(out.Type()).Implements(rawDecoderType) {
		if err := out.Addr().Interface().(rawDecoder).decodeRaw(raw); err != nil {
			d.fail(path, "%v", err)
		}
		return
	}
	switch out.Kind() {
	case reflect.Pointer:
		n := reflect.New(out.Type().Elem())
		d.value(path, raw, n.Elem())
		out.Set(n)
	case reflect.Struct:
		if d.enabledShorthand(path, raw, out) {
			return
		}
		d.object(path, raw, out)
	case reflect.Slice:
		d.list(path, raw, out)
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.fail(path, "want a string, got %s; quote the value", describe(raw))
			return
		}
		out.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := rawInt(raw)
		if err != nil {
			d.fail(path, "%v", err)
			return
		}
		out.SetInt(n)
	case reflect.Bool:
		b, err := rawBool(raw)
		if err != nil {
			d.fail(path, "%v", err)
			return
		}
		out.SetBool(b)
	default:
		d.fail(path, "cannot decode into %s", out.Type())
	}
}

// enabledShorthand decodes a boolean given for a struct with an enabled key (tls: true) as
// that key (tls: {enabled: true}) and reports whether it did.
func (d *decoder) enabledShorthand(path string, raw any, out reflect.Value) bool {
	i, ok := fieldIndex(out.Type(), "enabled")
	if !ok || out.FieldByIndex(i).Kind() != reflect.Bool {
		return false
	}
	if _, isMap := stringMap(raw); isMap {
		return false
	}
	b, err := rawBool(raw)
	if err != nil {
		d.fail(path, "want true or false (short for enabled), or a mapping of keys (%s), got %s", strings.Join(fieldKeys(out.Type()), ", "), describe(raw))
		return true
	}
	out.FieldByIndex(i).SetBool(b)
	d.present[joinKey(path, "enabled")] = true
	return true
}

// object decodes a mapping into the struct out, reporting unknown keys with the allowed ones.
func (d *decoder) object(path string, raw any, out reflect.Value) {
	m, ok := stringMap(raw)
	if !ok {
		d.fail(path, "want a mapping of keys (%s), got %s", strings.Join(fieldKeys(out.Type()), ", "), describe(raw))
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := out.Type()
	for _, k := range keys {
		i, ok := fieldIndex(t, k)
		if _, lowerOK := fieldIndex(t, strings.ToLower(k)); !ok && lowerOK {
			d.fail(joinKey(path, k), "keys are lower case; write %s", strings.ToLower(k))
			d.ps.skip[joinKey(path, strings.ToLower(k))] = true
			continue
		}
		if !ok {
			d.fail(joinKey(path, k), "unknown key; allowed keys here are %s", strings.Join(fieldKeys(t), ", "))
			continue
		}
		d.value(joinKey(path, k), m[k], out.FieldByIndex(i))
	}
}

// list decodes a sequence into the slice out. An empty sequence gives an empty, non-nil slice,
// so that validation can tell "key: []" from an absent key.
func (d *decoder) list(path string, raw any, out reflect.Value) {
	items, ok := raw.([]any)
	if !ok {
		d.fail(path, "want a list, got %s", describe(raw))
		return
	}
	s := reflect.MakeSlice(out.Type(), len(items), len(items))
	for i, item := range items {
		p := path + "[" + strconv.Itoa(i) + "]"
		if item == nil {
			d.fail(p, "empty list entry; remove it or fill it in")
			continue
		}
		d.value(p, item, s.Index(i))
	}
	out.Set(s)
}

// stringMap returns raw as a map with string keys. YAML mappings whose keys are not all strings
// decode to map[any]any; their keys are formatted.
func stringMap(raw any) (map[string]any, bool) {
	switch m := raw.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out, true
	}
	return nil, false
}

// jsonKey returns the key a struct field has in a config: the name of its json tag.
func jsonKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// keyFields lists the fields of struct type t that are config keys, in declaration order, with
// the fields of an embedded struct (ClickHouseTLS's TLS) in its place, as encoding/json does:
// use FieldByIndex with their Index.
func keyFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(t) {
		if k := jsonKey(f); f.IsExported() && !f.Anonymous && k != "" && k != "-" {
			out = append(out, f)
		}
	}
	return out
}

// fieldIndex finds the field of t whose key is key (an index for FieldByIndex).
func fieldIndex(t reflect.Type, key string) ([]int, bool) {
	for _, f := range keyFields(t) {
		if jsonKey(f) == key {
			return f.Index, true
		}
	}
	return nil, false
}

// fieldKeys lists the keys of t in declaration order.
func fieldKeys(t reflect.Type) []string {
	var keys []string
	for _, f := range keyFields(t) {
		keys = append(keys, jsonKey(f))
	}
	return keys
}

// describe names the kind of a decoded value for messages.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case int, int64, uint64, float64, json.Number:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	}
	return fmt.Sprintf("a value of type %T", v)
}

// rawInt reads an integer from a YAML or JSON number, or from a string of digits (environment
// variables are strings).
func rawInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("number %d is out of range", x)
		}
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= math.MaxInt64 {
			return 0, fmt.Errorf("want a whole number, got %v", x)
		}
		return int64(x), nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a whole number, got %s", x)
		}
		return n, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a whole number, got %q", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("want a whole number, got %s", describe(v))
}

// rawBool reads a boolean, or the strings true and false (from environment variables).
func rawBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("want true or false, got %s", describe(v))
}

// decodeJSONValue decodes one JSON value into the generic tree the decoder reads, with numbers
// kept exact.
func decodeJSONValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding JSON: unexpected data after the first value")
	}
	return v, nil
}

// leafPaths lists the key paths of every setting of t outside lists (the settings an
// environment variable can set), in declaration order.
func leafPaths(t reflect.Type, prefix string) []string {
	var out []string
	for _, f := range keyFields(t) {
		p := joinKey(prefix, jsonKey(f))
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case reflect.PointerTo(ft).Implements(rawDecoderType):
			out = append(out, p)
		case ft.Kind() == reflect.Struct:
			out = append(out, leafPaths(ft, p)...)
		case ft.Kind() == reflect.Slice:
			// lists (tables, key, metadata) are not settable from the environment
		default:
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}
