package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// The files of deploy/ that query a worker's metrics.
const (
	alertRulesFile     = "../deploy/prometheus/alerts.yml"
	alertRulesTestFile = "../deploy/prometheus/alerts_test.yml"
	dashboardFile      = "../deploy/grafana/sluice.json"
)

// TestAlertRules runs promtool (Debian's prometheus package, installed by
// scripts/install-tools.sh) on the alert rules: `promtool check rules` (syntax, templates) and
// `promtool test rules` (each alert fires on the series it should, with its annotations, and
// stays quiet on the ones it should not).
func TestAlertRules(t *testing.T) {
	defer parallel(t)()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): run scripts/install-tools.sh debian (it installs Debian's prometheus package)", err)
	}
	for _, args := range [][]string{
		{"check", "rules", filepath.Base(alertRulesFile)},
		{"test", "rules", filepath.Base(alertRulesTestFile)},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(alertRulesFile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRunbooks: every alert names a runbook, a section of docs/operations.md that exists.
func TestAlertRunbooks(t *testing.T) {
	defer parallel(t)()
	b, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
			h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
			anchors[strings.ReplaceAll(h, " ", "-")] = true
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			runbook := r.Annotations["runbook"]
			anchor, ok := strings.CutPrefix(runbook, "docs/operations.md#")
			if !ok || !anchors[anchor] {
				t.Errorf("alert %s: runbook %q is not a section of docs/operations.md", r.Alert, runbook)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want summary and description annotations", r.Alert)
			}
		}
	}
}

// metricPrefixes are the prefixes of the metrics a worker exports: Sluice's own, the Temporal
// SDK's and the Go client's. An expression's identifiers with one of them are metric names.
var metricPrefixes = []string{"sluice_", "temporal_", "go_", "process_", "promhttp_"}

// prometheusMade are the series Prometheus makes itself, never in a worker's scrape.
var prometheusMade = map[string]bool{"up": true}

var (
	promqlString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlIdentifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames are the metric names a PromQL expression (or a Grafana variable query) reads:
// its identifiers, outside string literals, with a worker's metric prefix or made by Prometheus.
func metricNames(expr string) []string {
	var names []string
	for _, id := range promqlIdentifier.FindAllString(promqlString.ReplaceAllString(expr, `""`), -1) {
		if prometheusMade[id] || slices.ContainsFunc(metricPrefixes, func(p string) bool { return strings.HasPrefix(id, p) }) {
			names = append(names, id)
		}
	}
	return names
}

// deployedExpressions are the PromQL expressions of the alert rules and of the dashboard
// (panel targets and variable queries), each with where it is.
func deployedExpressions(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	b, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("reading %s: %v", alertRulesFile, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs[alertRulesFile+": alert "+r.Alert+r.Record] = r.Expr
		}
	}
	b, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("reading %s: %v", dashboardFile, err)
	}
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[dashboardFile+": panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		switch q := v.Query.(type) {
		case string:
			exprs[dashboardFile+": variable "+v.Name] = q
		case map[string]any:
			s, _ := q["query"].(string)
			exprs[dashboardFile+": variable "+v.Name] = s
		}
	}
	return exprs
}

// dashboardPanel is what the test reads of a Grafana panel (rows hold their collapsed panels).
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// checkDeployedMetrics fails the test for every metric an alert rule or the dashboard reads that
// is not in s, a real scrape of a worker: a histogram's _bucket, _sum and _count series are its
// family's. An expression that reads no metric at all fails too (a name the prefixes missed).
func checkDeployedMetrics(t *testing.T, s scrape) {
	t.Helper()
	exprs := deployedExpressions(t)
	if len(exprs) == 0 {
		t.Fatal("no expressions found in the alert rules and the dashboard")
	}
	for where, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric the test knows (prefixes %v)", where, expr, metricPrefixes)
		}
		for _, name := range names {
			if prometheusMade[name] || inScrape(s, name) {
				continue
			}
			t.Errorf("%s: metric %s is not in a running worker's scrape (expression %q)", where, name, expr)
		}
	}
}

// inScrape reports whether metric name is a family of s, or a histogram's series of one.
func inScrape(s scrape, name string) bool {
	if _, ok := s[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := s[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
	}
	return false
}

func TestMetricNames(t *testing.T) {
	defer parallel(t)()
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job="sluice"} == 0`, []string{"up"}},
		{`max by (pipeline, slot) (sluice_slot_wal_status{wal_status="sluice_lost"}) == 1`, []string{"sluice_slot_wal_status"}},
		{`histogram_quantile(0.99, sum by (le) (rate(sluice_commit_duration_seconds_bucket{table=~"$table"}[$__rate_interval])))`,
			[]string{"sluice_commit_duration_seconds_bucket"}},
		{`label_values(sluice_source_wal_lsn, pipeline)`, []string{"sluice_source_wal_lsn"}},
		{`sum(rate(temporal_request_total[5m])) / sum(rate(temporal_request_failure_total[5m]))`,
			[]string{"temporal_request_total", "temporal_request_failure_total"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}
