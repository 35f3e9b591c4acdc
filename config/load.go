package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/viper"
)

// EnvPrefix starts the name of every environment variable that overrides a key: the key path in
// upper case with dots turned into underscores, after SLUICE_ (SLUICE_SOURCE_DSN sets source.dsn,
// SLUICE_SINK_CLICKHOUSE_PASSWORD sets sink.clickhouse.password). Keys inside lists (tables)
// cannot be set from the environment. An empty variable counts as unset.
const EnvPrefix = "SLUICE_"

// EnvName returns the environment variable that overrides the key at path, such as
// SLUICE_BATCH_MAX_ROWS for batch.max_rows.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// Load reads the config file at path (.yaml, .yml or .json), applies the SLUICE_* environment
// overrides, fills in defaults and validates it. The error lists every problem.
func Load(path string) (*Config, error) {
	return LoadWith(path, os.LookupEnv)
}

// LoadWith is Load with the SLUICE_* overrides looked up by lookupEnv instead of in the process
// environment: what a process started with that environment would load.
func LoadWith(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	var format string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		format = "yaml"
	case ".json":
		format = "json"
	default:
		return nil, fmt.Errorf("loading config %s: unknown file type; name it .yaml, .yml or .json", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	defer f.Close()
	c, err := parse(f, format, lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("loading config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads a config in format "yaml" or "json" from r, applies the SLUICE_* environment
// overrides, fills in defaults and validates it. The error lists every problem.
func Parse(r io.Reader, format string) (*Config, error) {
	return parse(r, format, os.LookupEnv)
}

// parse is Parse with the environment given as a lookup function.
func parse(r io.Reader, format string, lookupEnv func(string) (string, bool)) (*Config, error) {
	switch format {
	case "yaml", "yml":
		format = "yaml"
	case "json":
	default:
		return nil, fmt.Errorf("parsing config: unknown format %q; use yaml or json", format)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	v := viper.New()
	v.SetConfigType(format)
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("parsing %s config: %w", format, err)
	}
	origins := map[string]string{}
	file := v.AllSettings()
	for _, path := range leafPaths(reflect.TypeFor[Config](), "") {
		name := EnvName(path)
		if parent, ok := strings.CutSuffix(path, ".enabled"); ok {
			if _, set := lookupEnv(name); !set {
				name = EnvName(parent) // SLUICE_SINK_CLICKHOUSE_TLS=true, as tls: true in a file
			}
		}
		// An override under a key the file sets to something other than a mapping would hide
		// the file's mistake (viper replaces the value); leave it to the decoder to report.
		if val, ok := lookupEnv(name); ok && val != "" && mappingsAbove(file, path) {
			v.Set(path, val)
			origins[path] = name
		}
	}
	d := newDecoder(origins)
	d.checkKeys(data, format)
	var c Config
	d.decodeRoot(v.AllSettings(), &c)
	if err := c.finish(d); err != nil {
		return nil, err
	}
	return &c, nil
}

// FromJSON decodes a config from JSON (a config file in JSON), fills in
// defaults and validates it exactly as Parse does, without environment overrides. The error
// lists every problem.
func FromJSON(data []byte) (*Config, error) {
	raw, err := decodeJSONValue(data)
	if err != nil {
		return nil, err
	}
	d := newDecoder(nil)
	var c Config
	d.decodeRoot(raw, &c)
	if err := c.finish(d); err != nil {
		return nil, err
	}
	return &c, nil
}

// UnmarshalJSON decodes c strictly: unknown keys and values of the wrong type are errors, all of
// them reported at once. It neither fills in defaults nor validates; call Validate (or use
// FromJSON) for that.
func (c *Config) UnmarshalJSON(data []byte) error {
	raw, err := decodeJSONValue(data)
	if err != nil {
		return err
	}
	d := newDecoder(nil)
	var out Config
	d.decodeRoot(raw, &out)
	if err := d.ps.err(); err != nil {
		return err
	}
	*c = out
	return nil
}

// MarshalJSON encodes c with its keys; it exists beside UnmarshalJSON so that both directions
// are explicit. The encoding holds secrets: never log it, log Redacted instead.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // without methods, so encoding does not recurse
	return json.Marshal(plain(c))
}

// mappingsAbove reports whether every key above path in tree is a mapping or absent.
func mappingsAbove(tree map[string]any, path string) bool {
	segs := strings.Split(path, ".")
	cur := tree
	for _, s := range segs[:len(segs)-1] {
		next, ok := cur[s]
		if !ok || next == nil {
			return true
		}
		m, ok := stringMap(next)
		if !ok {
			return false
		}
		cur = m
	}
	return true
}
