package tests

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestSecretFromFile runs a pipeline whose source DSN, password included, is read from a file
// (source.dsn_file, as a mounted Docker or Kubernetes secret): the pipeline copies its table, and
// the password appears in no worker log, no starter output (status, input) and no error, even
// when the connection fails.
func TestSecretFromFile(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 300))
	const password = "Pa55-from-file-7f3a"
	u, err := url.Parse(p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	secret := testenv.WriteFile(t, p.dir, "source-dsn", []byte(u.String()+"\n"))

	// The config names the file instead of holding the DSN.
	raw, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "  dsn: ") {
			line = "  dsn_file: " + secret + "\n"
		}
		out = append(out, line)
	}
	if err := os.WriteFile(p.config, []byte(strings.Join(out, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.cfg, err = config.Load(p.config); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.cfg.Source.DSN, password) {
		t.Fatalf("source.dsn was not read from source.dsn_file")
	}

	w := p.worker("worker")
	p.sluice("start")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	shown := p.sluice("status") + p.sluice("input")

	// A failing connection (the same password, a port nothing listens on) reports its error
	// without the password.
	bad := *u
	bad.Host = "127.0.0.1:1"
	badFile := testenv.WriteFile(t, p.dir, "bad-dsn", []byte(bad.String()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkOut, err := localrun.Sluice(ctx, bins.Starter, nil,
		"check", "--config", testenv.WriteFile(t, p.dir, "bad.yaml", []byte(strings.ReplaceAll(strings.Join(out, ""), secret, badFile))))
	if err == nil {
		t.Fatalf("sluice check against a closed port succeeded:\n%s", checkOut)
	}
	shown += checkOut + err.Error()

	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(p.dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		shown += string(b)
	}
	if strings.Contains(shown, password) {
		i := strings.Index(shown, password)
		t.Fatalf("the password read from the file is shown: ...%s...", shown[max(0, i-200):min(len(shown), i+50)])
	}
	if !strings.Contains(shown, "public.items") {
		t.Fatalf("the outputs checked hold nothing about the pipeline:\n%s", shown)
	}
}
