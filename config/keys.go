package config

import (
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkKeys reports keys that viper would change without a word: keys with upper-case letters
// (viper lower-cases every key, so Pipeline would silently merge with pipeline) and keys with
// dots (viper reads "sink.type" as the nested key type of sink). data is the document viper
// read, in format "yaml" or "json".
func (d *decoder) checkKeys(data []byte, format string) {
	var raw any
	if format == "json" {
		v, err := decodeJSONValue(data)
		if err != nil {
			return // viper reports syntax errors
		}
		raw = v
	} else if err := yaml.Unmarshal(data, &raw); err != nil {
		return
	}
	d.walkKeys("", "", raw)
}

// walkKeys checks the keys under raw; path is the key path as written, lower the path viper and
// the decoder use.
func (d *decoder) walkKeys(path, lower string, raw any) {
	switch v := raw.(type) {
	case []any:
		for i, item := range v {
			idx := "[" + strconv.Itoa(i) + "]"
			d.walkKeys(path+idx, lower+idx, item)
		}
	case map[string]any, map[any]any:
		m, _ := stringMap(v)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, lp := joinKey(path, k), joinKey(lower, strings.ToLower(k))
			switch {
			case strings.Contains(k, "."):
				d.fail(p, "a key cannot contain a dot; nest the keys instead, one mapping per part")
				d.ps.skip[lp] = true
			case k != strings.ToLower(k):
				d.fail(p, "keys are lower case; write %s", strings.ToLower(k))
				d.ps.skip[lp] = true
			}
			d.walkKeys(p, lp, m[k])
		}
	}
}
