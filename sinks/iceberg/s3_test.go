package iceberg

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestS3Warehouse runs upserts, deletes, maintenance and a discard against an S3 warehouse
// (gofakes3 in process) with the sqlite catalog, and checks the files really are in the bucket.
func TestS3Warehouse(t *testing.T) {
	t.Parallel()
	info := testenv.S3(t)
	cfg := &Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, Dialect: DialectSQLite, URI: filepath.Join(t.TempDir(), "catalog.db")},
		Warehouse: "s3://" + info.Bucket + "/warehouse",
		S3: &config.S3{Endpoint: info.Endpoint, Region: info.Region,
			AccessKeyID: info.AccessKeyID, SecretAccessKey: info.SecretAccessKey},
	}
	h := newHarness(t, cfg)
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
	if loc := h.table().Location(); !strings.HasPrefix(loc, "s3://"+info.Bucket+"/") {
		t.Errorf("table location %s is not in the bucket", loc)
	}
	if n := countObjects(t.Context(), t, info, "warehouse/"); n == 0 {
		t.Errorf("no objects under s3://%s/warehouse/", info.Bucket)
	}

	if _, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2}); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan after maintenance differs:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != last.Hi {
		t.Errorf("Position after maintenance = %v, %v; want %s", p, ok, last.Hi)
	}
	if err := h.sink.DiscardSnapshot(t.Context(), h.spec); err != nil {
		t.Fatalf("DiscardSnapshot: %v", err)
	}
	if got := h.rows(); len(got) != 0 {
		t.Errorf("after discard: %v", got)
	}
}

func countObjects(ctx context.Context, t *testing.T, info testenv.S3Info, prefix string) int {
	t.Helper()
	out, err := info.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(info.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("listing the bucket: %v", err)
	}
	return len(out.Contents)
}

// TestPostgresCatalog runs the sink with the SQL catalog on PostgreSQL (pgx) and a local
// warehouse, including two sink instances sharing the catalog.
func TestPostgresCatalog(t *testing.T) {
	t.Parallel()
	dsn := testenv.NewDatabase(t)
	cfg := &Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, Dialect: DialectPostgres, URI: dsn},
		Warehouse: filepath.Join(t.TempDir(), "warehouse"),
	}
	h := newHarness(t, cfg)
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2))
	last := h.apply(orders.Delete(1), orders.Update(2, "b2", 2))

	other := newHarness(t, cfg) // EnsureTable on an existing table is a no-op
	if d := sinktest.DiffRows(map[int64]row{2: {"b2", 2}}, other.rows()); d != "" {
		t.Errorf("scan through a second sink differs:\n%s", d)
	}
	if p, ok := other.position(); !ok || p != last.Hi {
		t.Errorf("Position through a second sink = %v, %v; want %s", p, ok, last.Hi)
	}
}
