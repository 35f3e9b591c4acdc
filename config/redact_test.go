package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://sluice:s3cret@db:5432/shop?sslmode=disable", "postgres://sluice:REDACTED@db:5432/shop?sslmode=disable"},
		{"postgres://sluice@db/shop", "postgres://sluice@db/shop"},
		{"postgres://db/shop?user=u&password=s3cret", "postgres://db/shop?password=REDACTED&user=u"},
		{"host=db user=sluice password=s3cret dbname=shop", "host=db user=sluice password=REDACTED dbname=shop"},
		{"host=db password = 's3 cret' dbname=shop", "host=db password = REDACTED dbname=shop"},
		{`host=db PASSWORD='it\'s' dbname=shop`, "host=db PASSWORD=REDACTED dbname=shop"},
		{"postgres://u:p%zz@db/shop", "REDACTED"},
		{"host=db sslkey=/k.pem sslpassword=keyp4ss dbname=shop", "host=db sslkey=/k.pem sslpassword=REDACTED dbname=shop"},
		{"host=db sslpassword='key p4ss' password=s3cret", "host=db sslpassword=REDACTED password=REDACTED"},
		{"postgres://u:s3cret@db/shop?sslpassword=keyp4ss&sslmode=verify-full", "postgres://u:REDACTED@db/shop?sslmode=verify-full&sslpassword=REDACTED"},
		{"couchbases://u:s3cret@cb/?token=t0k", "couchbases://u:REDACTED@cb/?token=REDACTED"},
		{"", ""},
		{"/var/lib/catalog.db", "/var/lib/catalog.db"},
		{"s3://bucket/x?region=r&endpoint=http://h:9000", "s3://bucket/x?region=r&endpoint=http://h:9000"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			if got := redactDSN(tc.in); got != tc.want {
				t.Errorf("redactDSN(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// secretConfigs returns configs of every sink type with every secret set to a value that
// contains "s3cret".
func secretConfigs() map[string]*Config {
	base := func(s Sink) *Config {
		return &Config{
			Pipeline: "demo",
			Source:   Source{DSN: "postgres://sluice:s3cret-pg@db/shop?sslpassword=s3cret-key"},
			Temporal: Temporal{APIKey: "s3cret-temporal"},
			Staging:  Staging{URL: "/staging"},
			Sink:     s,
			Tables:   []Table{{Source: "public.orders", Target: "raw.orders", Key: []string{"id"}}},
		}
	}
	return map[string]*Config{
		"iceberg": base(Sink{Type: SinkIceberg, Iceberg: &Iceberg{
			Catalog:   IcebergCatalog{Type: CatalogSQL, Dialect: DialectPostgres, URI: "postgres://cat:s3cret-cat@db/catalog"},
			Warehouse: "s3://wh/prefix",
			S3:        &S3{Region: "us-east-1", AccessKeyID: "AKIA", SecretAccessKey: "s3cret-s3"},
		}}),
		"iceberg rest": base(Sink{Type: SinkIceberg, Iceberg: &Iceberg{
			Catalog:   IcebergCatalog{Type: CatalogREST, URI: "https://catalog.example", Credential: "client:s3cret-cred", Token: "s3cret-token"},
			Warehouse: "s3://wh/prefix",
		}}),
		"clickhouse": base(Sink{Type: SinkClickHouse, ClickHouse: &ClickHouse{Addr: "ch:9000", Password: "s3cret-ch"}}),
		"couchbase": base(Sink{Type: SinkCouchbase, Couchbase: &Couchbase{
			ConnStr: "couchbase://cb", Username: "u", Password: "s3cret-cb", Bucket: "b",
		}}),
		"plugin": base(Sink{Type: SinkPlugin, Plugin: &Plugin{
			Address: "plugin:50051", Token: "s3cret-plugin", TLS: TLS{CAFile: "/ca.pem"},
		}}),
	}
}

func TestRedactedHidesEverySecret(t *testing.T) {
	t.Parallel()
	for name, c := range secretConfigs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(c)
			r := c.Redacted()
			var logged strings.Builder
			slog.New(slog.NewTextHandler(&logged, nil)).Info("loaded", "config", *c, "ptr", c)
			outputs := map[string]string{
				"Redacted":  mustJSON(t, r),
				"String":    c.String(),
				"%v":        fmt.Sprintf("%v", c),
				"%+v value": fmt.Sprintf("%+v", *c),
				"%#v":       fmt.Sprintf("%#v", *c),
				"slog":      logged.String(),
			}
			for how, out := range outputs {
				if strings.Contains(out, "s3cret") {
					t.Errorf("%s shows a secret: %s", how, out)
				}
				if !strings.Contains(out, RedactedText) {
					t.Errorf("%s shows no %s: %s", how, RedactedText, out)
				}
			}
			// The copy is deep: redacting leaves c intact, and editing the copy does not reach c.
			r.Tables[0].Key[0] = "changed"
			if after, _ := json.Marshal(c); string(after) != string(before) {
				t.Errorf("Redacted changed the config:\n%s\n%s", before, after)
			}
			// Everything else survives redaction.
			if r.Pipeline != c.Pipeline || r.Tables[0].Target != c.Tables[0].Target || r.Sink.Type != c.Sink.Type {
				t.Errorf("Redacted lost settings: %s", mustJSON(t, r))
			}
		})
	}
}

// TestErrorsNeverShowSecrets checks that problems with secret settings do not repeat them.
func TestErrorsNeverShowSecrets(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"mysql://u:s3cret@h/db", "postgres://u:s3cret%zz@h/db", "password=s3cret"} {
		in := baseInput()
		set("source.dsn", dsn)(in)
		set("pipeline", "")(in) // an error in any case, so that there is a message to inspect
		data, _ := json.Marshal(in)
		_, err := FromJSON(data)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error for DSN %q shows the secret: %v", dsn, err)
		}
	}
}
