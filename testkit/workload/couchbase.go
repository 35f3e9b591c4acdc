package workload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/couchbase/gocb/v2"
)

// CouchbaseSink reads Couchbase targets document by document: without the query service a
// collection cannot be listed, so it gets the document of every key the source ever held (the
// generator's universe) and counts a found document of a deleted key as extra.
//
// Encodings it normalizes (see the sink's package documentation): numbers are read as written
// (never through float64, so a bigint beyond 2^53 compares exactly); numeric is a JSON string;
// bytea is base64; json and jsonb are embedded JSON values; dates, times and timestamps are ISO
// 8601 strings with at most 6 fractional digits (timestamp without zone, timestamptz with Z);
// oid is a number; hstore is a JSON object (compared as the hstore text it spells, HstoreText);
// the other types carried as text (money, geometry, ...) are strings.
// Every value maps exactly, so Expect changes nothing. A document key is the key's text, or
// for a composite key the parts with % as %25 and : as %3A, joined by ::.
type CouchbaseSink struct {
	Bucket *gocb.Bucket
	// Collection maps a workload table name to its scope and collection.
	Collection func(table string) (scope, collection string)
}

// Name implements Sink.
func (s CouchbaseSink) Name() string { return "couchbase" }

// Expect implements Sink: Couchbase holds every workload value exactly.
func (s CouchbaseSink) Expect(_ Column, v string) string { return v }

// DocumentKey is the Couchbase document key of k.
func DocumentKey(k Key) string {
	if len(k) == 1 {
		return k[0]
	}
	parts := make([]string, len(k))
	for i, p := range k {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "%", "%25"), ":", "%3A")
	}
	return strings.Join(parts, "::")
}

// Read implements Sink.
func (s CouchbaseSink) Read(ctx context.Context, t *Table, universe []Key) ([]Row, error) {
	scope, coll := s.Collection(t.Name)
	ids := make([]string, len(universe))
	for i, k := range universe {
		ids[i] = DocumentKey(k)
	}
	var out []Row
	err := GetDocuments(ctx, s.Bucket.Scope(scope).Collection(coll), ids, func(id string, body json.RawMessage) error {
		vals, err := documentValues(t, body)
		if err != nil {
			return fmt.Errorf("document %s: %w", id, err)
		}
		out = append(out, t.row(vals))
		return nil
	})
	return out, err
}

// getBatch is how many documents GetDocuments asks for in one bulk operation.
const getBatch = 1000

// GetDocuments gets the documents of ids from col and calls each with the id and body of every
// one found, in the order of ids; a missing document is skipped. It asks getBatch at a time in
// bulk operations (one request after another on the connection, without waiting for each
// answer): one Get at a time was a round trip per key, and a check reads every key each poll.
// gocb's bulk operations ignore the context and, without a timeout, allow the KV timeout once
// per operation (2.5 s × 1,000 = 41 minutes against a server that stopped answering): each is
// bounded by the context's deadline instead (a minute without one).
func GetDocuments(ctx context.Context, col *gocb.Collection, ids []string, each func(id string, body json.RawMessage) error) error {
	for lo := 0; lo < len(ids); lo += getBatch {
		gets := make([]*gocb.GetOp, 0, getBatch)
		ops := make([]gocb.BulkOp, 0, getBatch)
		for _, id := range ids[lo:min(lo+getBatch, len(ids))] {
			g := &gocb.GetOp{ID: id}
			gets, ops = append(gets, g), append(ops, g)
		}
		timeout := time.Minute
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(dl), time.Second)
		}
		if err := col.Do(ops, &gocb.BulkOpOptions{Context: ctx, Timeout: timeout}); err != nil {
			return fmt.Errorf("bulk get of %d documents: %w", len(ops), err)
		}
		for _, g := range gets {
			if errors.Is(g.Err, gocb.ErrDocumentNotFound) {
				continue
			}
			if g.Err != nil {
				return fmt.Errorf("get %s: %w", g.ID, g.Err)
			}
			var body json.RawMessage
			if err := g.Result.Content(&body); err != nil {
				return fmt.Errorf("document %s: %w", g.ID, err)
			}
			if err := each(g.ID, body); err != nil {
				return err
			}
		}
	}
	return nil
}

// documentValues decodes a document body into one text per column of t, for Canon.
func documentValues(t *Table, raw []byte) ([]string, error) {
	var body map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		return nil, err
	}
	vals := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		v, ok := body[c.Name]
		if !ok {
			vals[i] = "absent"
			continue
		}
		if string(v) == "null" {
			vals[i] = Null
			continue
		}
		switch c.Kind {
		case JSON, Int4Array, TextArray, IntervalArray, Int2, Int4, Int8, Float4, Float8, Bool, OID:
			vals[i] = string(v)
			continue
		case Hstore:
			h, err := HstoreText(v)
			if err != nil {
				h = "not an hstore object: " + string(v)
			}
			vals[i] = h
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			vals[i] = "not a string: " + string(v)
			continue
		}
		if c.Kind == Bytea {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				vals[i] = "not base64: " + s
				continue
			}
			s = hex.EncodeToString(b)
		}
		vals[i] = s
	}
	return vals, nil
}

// HstoreText prints the JSON object the Couchbase sink writes for an hstore as the text Postgres
// prints for it: `"k"=>"v", "n"=>NULL`, pairs in the document's order (the sink keeps Postgres'
// order), " and \ escaped by a backslash.
func HstoreText(raw json.RawMessage) (string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object")
	}
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	var b strings.Builder
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + esc.Replace(tok.(string)) + `"=>`)
		var v *string
		if err := d.Decode(&v); err != nil {
			return "", err
		}
		if v == nil {
			b.WriteString("NULL")
		} else {
			b.WriteString(`"` + esc.Replace(*v) + `"`)
		}
	}
	return b.String(), nil
}
