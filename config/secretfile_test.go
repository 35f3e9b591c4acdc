package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// secretFileKeys lists every <key>_file setting of the config whose <key> is a setting too.
func secretFileKeys() []string {
	all := keyPaths(reflect.TypeFor[Config](), "")
	has := map[string]bool{}
	for _, p := range all {
		has[p] = true
	}
	var out []string
	for _, p := range all {
		if secret, ok := strings.CutSuffix(p, SecretFileSuffix); ok && has[secret] {
			out = append(out, p)
		}
	}
	return out
}

// TestSecretFilesLoad sets every <key>_file, from the file and from its SLUICE_*_FILE variable,
// to a file holding a secret, and checks that <key> holds the file's content (without its
// trailing newline), that the redacted config and the loader's errors never show it, and that
// setting both <key> and <key>_file is refused.
func TestSecretFilesLoad(t *testing.T) {
	t.Parallel()
	keys := secretFileKeys()
	if len(keys) == 0 {
		t.Fatal("no secret file keys found")
	}
	for _, key := range keys {
		for _, fromEnv := range []bool{false, true} {
			name := key
			if fromEnv {
				name += " from " + EnvName(key)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				secret := "s3cr3t-" + strings.ReplaceAll(key, ".", "-")
				file := filepath.Join(t.TempDir(), "secret")
				if err := os.WriteFile(file, []byte(secretValue(key, secret)+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				tree := secretFileBase(key)
				env := map[string]string{}
				if fromEnv {
					env[EnvName(key)] = file
				} else {
					setPath(tree, key, file)
				}
				c, err := parse(strings.NewReader(mustJSONValue(t, tree)), "json", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
				if err != nil {
					t.Fatalf("a config with %s does not load: %v", key, err)
				}
				got := lookupString(t, c, strings.TrimSuffix(key, SecretFileSuffix))
				if !strings.Contains(got, secret) {
					t.Fatalf("%s holds %q, want the file's content %q", strings.TrimSuffix(key, SecretFileSuffix), got, secret)
				}
				if strings.Contains(c.String(), secret) {
					t.Fatalf("the redacted config shows the secret read from %s: %s", key, c.String())
				}

				// Both set: refused, without repeating the secret.
				setPath(tree, strings.TrimSuffix(key, SecretFileSuffix), secretValue(key, "other-"+secret))
				_, err = parse(strings.NewReader(mustJSONValue(t, tree)), "json", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
				var ce *Error
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), "both") {
					t.Fatalf("%s and its secret both set: got %v, want a problem saying both are set", key, err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows the secret: %v", err)
				}
			})
		}
	}
}

// TestSecretFileUnreadable checks that a missing secret file is a problem naming the key.
func TestSecretFileUnreadable(t *testing.T) {
	t.Parallel()
	tree := secretFileBase("temporal.api_key_file")
	setPath(tree, "temporal.api_key_file", filepath.Join(t.TempDir(), "missing"))
	_, err := parse(strings.NewReader(mustJSONValue(t, tree)), "json", noEnv)
	if err == nil || !strings.Contains(err.Error(), "temporal.api_key_file: cannot read the secret file") {
		t.Fatalf("got %v, want a problem at temporal.api_key_file", err)
	}
}

// secretFileBase is a valid config (without its secret when key is source.dsn_file) whose sink
// is the one key belongs to.
func secretFileBase(key string) map[string]any {
	tree := map[string]any{}
	setPath(tree, "pipeline", "p")
	if key != "source.dsn_file" {
		setPath(tree, "source.dsn", "postgres://u@h/db")
	}
	setPath(tree, "staging.url", "/tmp/staging")
	setPath(tree, "tables[].source", "public.t")
	setPath(tree, "tables[].target", "raw.t")
	sink := SinkIceberg
	for _, s := range []string{SinkClickHouse, SinkCouchbase, SinkPlugin} {
		if strings.HasPrefix(key, "sink."+s+".") {
			sink = s
		}
	}
	setPath(tree, "sink.type", sink)
	switch sink {
	case SinkIceberg:
		catalog := "sql"
		if strings.Contains(key, "credential") || strings.Contains(key, "token") {
			catalog = "rest"
		}
		setPath(tree, "sink.iceberg.catalog.type", catalog)
		if key == "sink.iceberg.catalog.uri_file" {
			setPath(tree, "sink.iceberg.catalog.dialect", DialectPostgres)
		} else {
			uri := "/tmp/catalog.db"
			if catalog == "rest" {
				uri = "https://catalog.internal/api"
			}
			setPath(tree, "sink.iceberg.catalog.uri", uri)
		}
		setPath(tree, "sink.iceberg.warehouse", "s3://lake/wh")
		setPath(tree, "sink.iceberg.s3.region", "us-east-1")
		if key == "sink.iceberg.s3.secret_access_key_file" {
			setPath(tree, "sink.iceberg.s3.access_key_id", "AKIA")
		}
	case SinkClickHouse:
		setPath(tree, "sink.clickhouse.addr", "ch:9000")
	case SinkCouchbase:
		setPath(tree, "sink.couchbase.connstr", "couchbase://cb")
		setPath(tree, "sink.couchbase.username", "u")
		setPath(tree, "sink.couchbase.bucket", "b")
	case SinkPlugin:
		setPath(tree, "sink.plugin.address", "plugin:50051")
		setPath(tree, "sink.plugin.tls.ca_file", "/etc/sluice/plugin-ca.pem")
	}
	return tree
}

// secretValue is a valid value of the secret that key's file holds.
func secretValue(key, secret string) string {
	switch key {
	case "source.dsn_file":
		return "postgres://u:" + secret + "@h/db"
	case "sink.iceberg.catalog.uri_file", "sink.plugin.position_store.dsn_file":
		return "postgres://u:" + secret + "@h/catalog"
	case "sink.iceberg.catalog.credential_file":
		return "client:" + secret
	}
	return secret
}

// lookupString returns the string setting at path of c.
func lookupString(t *testing.T, c *Config, path string) string {
	t.Helper()
	v := reflect.ValueOf(c).Elem()
	for seg := range strings.SplitSeq(path, ".") {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		i, ok := fieldIndex(v.Type(), seg)
		if !ok {
			t.Fatalf("no key %s in %s", seg, path)
		}
		v = v.FieldByIndex(i)
	}
	return v.String()
}

// mustJSONValue encodes a config tree as JSON.
func mustJSONValue(t *testing.T, tree map[string]any) string {
	t.Helper()
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
