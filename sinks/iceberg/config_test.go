package iceberg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestSettingsFromConfigFile loads a config file with the three table settings of
// docs/config.md and checks that the table the sink creates has them: a bucket(4) partition on
// the key, and the zstd level and target file size as the properties its Parquet writer and
// compaction read.
func TestSettingsFromConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := fmt.Sprintf(`
pipeline: settings
source: {dsn: "postgres://sluice@db/shop"}
staging: {url: %q}
sink:
  type: iceberg
  iceberg:
    catalog: {type: sql, uri: %q}
    warehouse: %q
    partition_buckets: 4
    compression_level: 9
    target_file_size_bytes: 32MiB
    maintenance: {expire_snapshots_after: 36h}
tables: [{source: shop.orders, target: raw.orders}]
`, filepath.Join(dir, "staging"), filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	cfg, err := config.Parse(strings.NewReader(yaml), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, cfg.Sink.Iceberg)
	tbl := h.table()

	spec := tbl.Spec()
	if spec.NumFields() != 1 {
		t.Fatalf("partition spec %s, want one field", spec)
	}
	f := spec.Field(0)
	src, _ := tbl.Schema().FindColumnName(f.SourceIDs[0])
	if f.Transform != (iceberg.BucketTransform{NumBuckets: 4}) || src != "id" {
		t.Errorf("partition field %v on %s, want bucket[4] on id", f, src)
	}
	props := tbl.Properties()
	for key, want := range map[string]string{
		table.ParquetCompressionKey:       "zstd",
		table.ParquetCompressionLevelKey:  "9",
		table.WriteTargetFileSizeBytesKey: "33554432",
	} {
		if got := props[key]; got != want {
			t.Errorf("table property %s = %q, want %q", key, got, want)
		}
	}
	if got := h.sink.maintenance.MaxSnapshotAge; got != 36*time.Hour {
		t.Errorf("maintenance expires snapshots after %s, want expire_snapshots_after 36h", got)
	}
	// The writer reads the level from the table: a batch writes with it.
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2))
	if got := h.rows(); len(got) != 2 {
		t.Errorf("rows %v, want 2", got)
	}
}

// restServer is an Iceberg REST catalog that answers the config and OAuth2 token endpoints and
// records what it was sent.
type restServer struct {
	mu           sync.Mutex
	tokenForm    map[string]string // form of the last token request
	configAuth   string            // Authorization header of the last config request
	issuedBearer string
}

func (s *restServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/oauth/tokens":
		_ = r.ParseForm()
		s.tokenForm = map[string]string{}
		for k := range r.PostForm {
			s.tokenForm[k] = r.PostForm.Get(k)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": s.issuedBearer, "token_type": "bearer", "expires_in": 3600,
			"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		})
	case "/v1/config":
		s.configAuth = r.Header.Get("Authorization")
		_ = json.NewEncoder(w).Encode(map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	default:
		http.NotFound(w, r)
	}
}

// TestRESTCatalogAuth checks that sink.iceberg.catalog.credential and token reach the REST
// catalog: the credential is exchanged for a token at the catalog's OAuth2 endpoint, and either
// token is sent as the bearer of the catalog's requests.
func TestRESTCatalogAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, credential, token string
		wantForm                map[string]string
		wantAuth                string
	}{
		{"credential", "sluice-client:cl1ent-secret", "",
			map[string]string{"grant_type": "client_credentials", "client_id": "sluice-client", "client_secret": "cl1ent-secret", "scope": "catalog"},
			"Bearer issued-by-catalog"},
		{"token", "", "st4tic-token", nil, "Bearer st4tic-token"},
		{"neither", "", "", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := &restServer{issuedBearer: "issued-by-catalog"}
			srv := httptest.NewServer(rs)
			t.Cleanup(srv.Close)
			cfg := Config{
				Catalog:   CatalogConfig{Type: CatalogREST, URI: srv.URL, Credential: tc.credential, Token: tc.token},
				Warehouse: "file://" + t.TempDir(),
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cat, err := openCatalog(context.Background(), &cfg)
			if err != nil {
				t.Fatalf("openCatalog: %v", err)
			}
			_ = cat
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if rs.configAuth != tc.wantAuth {
				t.Errorf("config request Authorization %q, want %q", rs.configAuth, tc.wantAuth)
			}
			for k, want := range tc.wantForm {
				if got := rs.tokenForm[k]; got != want {
					t.Errorf("token request %s = %q, want %q", k, got, want)
				}
			}
			if tc.wantForm == nil && rs.tokenForm != nil {
				t.Errorf("token request sent without a credential: %v", rs.tokenForm)
			}
		})
	}
}
