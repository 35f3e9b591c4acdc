package tests

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks/iceberg"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// icebergRESTExample is the sink section of examples/iceberg-s3.yaml, verbatim, and the
// environment that points it at the stack's SeaweedFS as a user would: the catalog's and the S3
// gateway's addresses, the catalog's OAuth2 credential and the S3 secret through the SLUICE_*
// variables the example names, and staging (a prefix of the test's own in weed's plain bucket)
// with its AWS_* key pair.
func icebergRESTExample(t *testing.T) (sinkYAML string, env []string) {
	t.Helper()
	info := testenv.Weed(t)
	b, err := os.ReadFile("../examples/iceberg-s3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\nsink:\n")
	if !ok {
		t.Fatal("examples/iceberg-s3.yaml has no sink section")
	}
	var lines []string
	for line := range strings.Lines(rest) {
		if line != "\n" && !strings.HasPrefix(line, " ") {
			break // the next top-level key
		}
		lines = append(lines, line)
	}
	sinkYAML = strings.TrimRight(strings.Join(lines, ""), "\n")
	if !strings.Contains(sinkYAML, "warehouse: "+info.Warehouse+"\n") || !strings.Contains(sinkYAML, "access_key_id: "+info.AccessKeyID+"\n") {
		t.Fatalf("examples/iceberg-s3.yaml's warehouse and access key are not devstack weed's (%s, %s):\n%s", info.Warehouse, info.AccessKeyID, sinkYAML)
	}
	staging := fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&path_style=true",
		info.Staging, testenv.RandomName("t"), url.QueryEscape(info.S3Endpoint), info.Region)
	env = []string{
		config.EnvName("sink.iceberg.catalog.uri") + "=" + info.CatalogURI,
		config.EnvName("sink.iceberg.catalog.credential") + "=" + info.Credential(),
		config.EnvName("sink.iceberg.s3.endpoint") + "=" + info.S3Endpoint,
		config.EnvName("sink.iceberg.s3.secret_access_key") + "=" + info.SecretAccessKey,
		config.EnvName("staging.url") + "=" + staging,
		"AWS_ACCESS_KEY_ID=" + info.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + info.SecretAccessKey,
	}
	return sinkYAML, env
}

// dropIcebergNamespace drops every table of namespace ns, then ns, through the catalog of the
// config cfg returns at cleanup (nil: nothing to drop): the tests share one catalog and table
// bucket.
func dropIcebergNamespace(t *testing.T, cfg func() *config.Config, ns string) {
	t.Cleanup(func() {
		c := cfg()
		if c == nil {
			return // the pipeline was never configured
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := pipeline.Open(ctx, c, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Logf("dropping namespace %s: %v", ns, err)
			return
		}
		defer s.Close(ctx)
		cat := s.(*iceberg.Sink).Catalog()
		for ident, err := range cat.ListTables(ctx, table.Identifier{ns}) {
			if err != nil {
				t.Logf("listing the tables of %s: %v", ns, err)
				break
			}
			if err := cat.DropTable(ctx, ident); err != nil {
				t.Logf("dropping %v: %v", ident, err)
			}
		}
		if err := cat.DropNamespace(ctx, catalog.ToIdentifier(ns)); err != nil {
			t.Logf("dropping namespace %s: %v", ns, err)
		}
	})
}
