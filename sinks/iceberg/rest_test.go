package iceberg

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// weedConfig is a sink configuration on the stack's SeaweedFS: its REST catalog, authenticated
// with credential (client_id:client_secret) or token, and its S3 gateway as the warehouse's
// store with the access key pair s3Key:s3Secret.
func weedConfig(info testenv.WeedInfo, credential, token, s3Key, s3Secret string) Config {
	return Config{
		Catalog:   CatalogConfig{Type: CatalogREST, URI: info.CatalogURI, Credential: credential, Token: token},
		Warehouse: info.Warehouse,
		S3:        &config.S3{Endpoint: info.S3Endpoint, Region: info.Region, AccessKeyID: s3Key, SecretAccessKey: s3Secret},
	}
}

// newRESTHarness is a harness on cfg whose table is target (a namespace of the test's own in the
// shared catalog), dropped with its namespace at cleanup.
func newRESTHarness(t *testing.T, cfg Config, target string) *harness {
	t.Helper()
	s, err := New(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	h := &harness{t: t, sink: s, spec: orders.Spec(target), lsn: 0x16B3748}
	if err := s.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return h
}

// dropOnCleanup drops target and its namespace from the catalog of s at cleanup.
func dropOnCleanup(t *testing.T, s *Sink, target string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ident, _ := identifier(target)
		if err := s.Catalog().DropTable(ctx, ident); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			t.Logf("dropping %s: %v", target, err)
		}
		if err := s.Catalog().DropNamespace(ctx, catalog.NamespaceFromIdent(ident)); err != nil {
			t.Logf("dropping the namespace of %s: %v", target, err)
		}
	})
}

// TestRESTCatalogOnWeed runs the sink against a real Iceberg REST catalog on S3 (SeaweedFS's weed
// mini, started by devstack, credentials required on both): the OAuth2 client credential is
// exchanged for a token, the namespace and table are created through the catalog, upserts and
// deletes commit, maintenance rewrites the table, a second sink authenticated with a bearer token
// reads the same rows and position, and a discard empties the table. The files are in the
// catalog's table bucket.
func TestRESTCatalogOnWeed(t *testing.T) {
	t.Parallel()
	info := testenv.Weed(t)
	target := testenv.RandomName("rest_") + ".orders"
	h := newRESTHarness(t, weedConfig(info, info.Credential(), "", info.AccessKeyID, info.SecretAccessKey), target)
	dropOnCleanup(t, h.sink, target)

	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2), orders.Insert(3, "c", 3))
	h.apply(orders.Update(2, "b2", 22), orders.Delete(3), orders.Insert(4, "d", 4))
	last := h.apply(orders.Delete(1), orders.Insert(3, "c2", 33))
	want := map[int64]row{2: {"b2", 22}, 3: {"c2", 33}, 4: {"d", 4}}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan differs:\n%s", d)
	}
	if _, eq := h.fileCounts(); eq == 0 {
		t.Errorf("no equality delete files written")
	}
	if loc := h.table().Location(); !strings.HasPrefix(loc, info.Warehouse+"/") {
		t.Errorf("table location %s is not in the catalog's table bucket %s", loc, info.Warehouse)
	}
	if _, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2}); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan after maintenance differs:\n%s", d)
	}

	token, err := devstack.WeedToken(t.Context(), info.CatalogURI, info.AccessKeyID, info.SecretAccessKey)
	if err != nil {
		t.Fatal(err)
	}
	other := newRESTHarness(t, weedConfig(info, "", token, info.AccessKeyID, info.SecretAccessKey), target)
	if d := sinktest.DiffRows(want, other.rows()); d != "" {
		t.Errorf("scan through a sink authenticated with a token differs:\n%s", d)
	}
	if p, ok := other.position(); !ok || p != last.Hi {
		t.Errorf("Position through a second sink = %v, %v; want %s", p, ok, last.Hi)
	}
	if err := h.sink.DiscardSnapshot(t.Context(), h.spec); err != nil {
		t.Fatalf("DiscardSnapshot: %v", err)
	}
	if got := other.rows(); len(got) != 0 {
		t.Errorf("after discard: %v", got)
	}
}

// TestRESTCatalogWrongCredentials checks that wrong credentials stop the sink with an error that
// says which: a wrong catalog secret or token when it connects (the catalog's config endpoint
// needs no auth: the sink makes one authenticated request to find out), a wrong S3 secret when it
// first writes data files.
func TestRESTCatalogWrongCredentials(t *testing.T) {
	t.Parallel()
	info := testenv.Weed(t)
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr error  // the REST error
		wantKey string // the key the message tells to fix
	}{
		{"catalog secret", weedConfig(info, info.AccessKeyID+":wrong", "", info.AccessKeyID, info.SecretAccessKey),
			rest.ErrOAuthError, "sink.iceberg.catalog.credential"},
		{"catalog token", weedConfig(info, "", "not-a-token", info.AccessKeyID, info.SecretAccessKey),
			rest.ErrUnauthorized, "sink.iceberg.catalog.token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(t.Context(), tc.cfg, Options{})
			if err == nil {
				t.Fatal("New succeeded with a wrong catalog credential")
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("New with a wrong %s: %v; want %q naming %s", tc.name, err, tc.wantErr, tc.wantKey)
			}
		})
	}
	t.Run("s3 secret", func(t *testing.T) {
		t.Parallel()
		target := testenv.RandomName("rest_") + ".orders"
		h := newRESTHarness(t, weedConfig(info, info.Credential(), "", info.AccessKeyID, "wrong-secret"), target)
		dropOnCleanup(t, h.sink, target)
		err := h.sink.Apply(t.Context(), h.batch(batch.PhaseStream, orders.Insert(1, "a", 1)))
		if err == nil {
			t.Fatal("Apply succeeded with a wrong S3 secret")
		}
		t.Logf("Apply with a wrong S3 secret: %v", err)
		if !strings.Contains(err.Error(), "SignatureDoesNotMatch") && !strings.Contains(err.Error(), "AccessDenied") &&
			!strings.Contains(err.Error(), strings.ToLower(http.StatusText(http.StatusForbidden))) {
			t.Errorf("Apply with a wrong S3 secret: %v; want the store's refusal", err)
		}
	})
}

// TestRESTCatalogVendedCredentials runs the sink against a SeaweedFS whose catalog vends
// table-scoped S3 credentials: configured with a wrong S3 secret (which the shared weed refuses,
// TestRESTCatalogWrongCredentials), the sink still writes and reads, because iceberg-go asks for
// vended credentials and uses them for the table's files instead of the configured keys.
func TestRESTCatalogVendedCredentials(t *testing.T) {
	t.Parallel()
	info := testenv.VendingWeed(t)
	target := testenv.RandomName("vend_") + ".orders"
	h := newRESTHarness(t, weedConfig(info, info.Credential(), "", info.AccessKeyID, "wrong-secret"), target)
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2))
	last := h.apply(orders.Update(2, "b2", 22), orders.Delete(1))
	if d := sinktest.DiffRows(map[int64]row{2: {"b2", 22}}, h.rows()); d != "" {
		t.Errorf("scan differs:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != last.Hi {
		t.Errorf("Position = %v, %v; want %s", p, ok, last.Hi)
	}
}
