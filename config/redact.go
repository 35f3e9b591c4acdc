package config

import (
	"encoding/json"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/sluicecdc/sluice/sinks"
)

// RedactedText is what replaces a secret in Redacted configs.
const RedactedText = "REDACTED"

// passwordKV matches a password in a key=value connection string, quoted or not.
// It covers password= and sslpassword= (the passphrase of an encrypted client key).
var passwordKV = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s]*)`)

// Redacted returns a deep copy of c with every secret replaced by REDACTED: passwords inside
// DSNs and URIs, sink passwords, the REST catalog's credential and token and the S3 secret key. Print and log this copy, never c.
func (c *Config) Redacted() *Config {
	r := *c
	r.Source.DSN = redactDSN(c.Source.DSN)
	r.Temporal.APIKey = redactSecret(c.Temporal.APIKey)
	r.Tables = make([]Table, len(c.Tables))
	for i, t := range c.Tables {
		t.Metadata = append([]sinks.MetadataColumn(nil), t.Metadata...)
		if t.Key != nil {
			t.Key = append([]string{}, t.Key...)
		}
		r.Tables[i] = t
	}
	if c.Tables == nil {
		r.Tables = nil
	}
	if ice := c.Sink.Iceberg; ice != nil {
		cp := *ice
		cp.Catalog.URI = redactDSN(ice.Catalog.URI)
		cp.Catalog.Credential = redactSecret(ice.Catalog.Credential)
		cp.Catalog.Token = redactSecret(ice.Catalog.Token)
		if ice.S3 != nil {
			s3 := *ice.S3
			s3.SecretAccessKey = redactSecret(s3.SecretAccessKey)
			cp.S3 = &s3
		}
		r.Sink.Iceberg = &cp
	}
	if ch := c.Sink.ClickHouse; ch != nil {
		cp := *ch
		cp.Password = redactSecret(ch.Password)
		r.Sink.ClickHouse = &cp
	}
	if cb := c.Sink.Couchbase; cb != nil {
		cp := *cb
		cp.Password = redactSecret(cb.Password)
		cp.ConnStr = redactDSN(cb.ConnStr)
		r.Sink.Couchbase = &cp
	}
	if pl := c.Sink.Plugin; pl != nil {
		cp := *pl
		cp.Token = redactSecret(pl.Token)
		cp.PositionStore.DSN = redactDSN(pl.PositionStore.DSN)
		r.Sink.Plugin = &cp
	}
	r.Staging.URL = redactDSN(c.Staging.URL)
	return &r
}

// String returns the redacted config as JSON, so printing a Config never shows a secret.
func (c Config) String() string {
	b, err := json.Marshal(c.Redacted())
	if err != nil {
		return "config(" + err.Error() + ")"
	}
	return string(b)
}

// LogValue logs the redacted config, so passing a Config to slog never logs a secret.
func (c Config) LogValue() slog.Value {
	return slog.StringValue(c.String())
}

// redactSecret hides a non-empty secret.
func redactSecret(s string) string {
	if s == "" {
		return ""
	}
	return RedactedText
}

// redactDSN hides the password of a URL (user info and password/secret query parameters) or
// of a key=value connection string. A URL it cannot parse is hidden entirely.
func redactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	if !strings.Contains(dsn, "://") {
		return passwordKV.ReplaceAllString(dsn, "${1}"+RedactedText)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return RedactedText
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), RedactedText)
		}
	}
	q := u.Query()
	changed := false
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "password") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") || lk == "sslkey" {
			q.Set(k, RedactedText)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// GoString returns the redacted config too, so %#v never shows a secret either.
func (c Config) GoString() string { return c.String() }
