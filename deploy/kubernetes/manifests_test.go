package kubernetes

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/metrics"
)

// The worker's memory budget, as worker/memlimit.go sets it with --memory-limit auto: the Go
// heap is held to heapShare of the container's limit, and the worker needs about
// batchesInMemory batches of batch.max_bytes.
const (
	heapShare       = 0.75
	batchesInMemory = 5
)

// manifests are the objects of this directory, each decoded strictly into its Kubernetes API type.
type manifests struct {
	deployment *appsv1.Deployment
	configMap  *corev1.ConfigMap
	pdb        *policyv1.PodDisruptionBudget
}

// decodeStrict decodes one YAML document into the API type of its kind with apimachinery's
// strict serializer, as the API server's strict field validation does: unknown fields,
// duplicate fields and fields in the wrong case are refused (a misspelt field would otherwise
// be dropped and never take effect).
func decodeStrict(doc []byte) (any, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	s := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme, scheme,
		serializerjson.SerializerOptions{Yaml: true, Strict: true})
	obj, gvk, err := s.Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	switch obj.(type) {
	case *appsv1.Deployment, *corev1.ConfigMap, *policyv1.PodDisruptionBudget:
		return obj, nil
	}
	return nil, fmt.Errorf("%s is not a kind this test checks; add it", gvk)
}

// load decodes every YAML file of the directory.
func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, err := decodeStrict(doc)
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployment = o
			case *corev1.ConfigMap:
				m.configMap = o
			case *policyv1.PodDisruptionBudget:
				m.pdb = o
			}
		}
	}
	if m.deployment == nil || m.configMap == nil || m.pdb == nil {
		t.Fatalf("want a Deployment, a ConfigMap and a PodDisruptionBudget in %v", files)
	}
	return m
}

// TestStrictDecodingRefusesMisspeltFields shows the check below has teeth: a manifest with a
// misspelt field does not decode.
func TestStrictDecodingRefusesMisspeltFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, typo := range [][2]string{{"readinessProbe:", "readinesProbe:"}, {"readOnlyRootFilesystem:", "readOnlyRootFileSystem:"}, {"defaultMode:", "defaultmode:"}} {
		bad := bytes.Replace(b, []byte(typo[0]), []byte(typo[1]), 1)
		if bytes.Equal(bad, b) {
			t.Fatalf("deployment.yaml has no %s", typo[0])
		}
		if _, err := decodeStrict(bad); err == nil || !strings.Contains(err.Error(), `unknown field "spec.template.spec.`) {
			t.Errorf("a Deployment with %s decoded: %v", typo[1], err)
		}
	}
}

// TestManifests checks the worker's manifests the way the API server would take them (strict
// decoding into k8s.io/api types: no schemas from the internet here) and against the worker:
// the probes ask the worker's health endpoints on the port it serves, the scrape annotations
// name its metrics, the memory follows its budget, every *_file of the config is a mounted
// secret, the config in the ConfigMap loads, the pod runs non-root on a read-only root
// filesystem, and the disruption budget covers the workers.
func TestManifests(t *testing.T) {
	t.Parallel()
	m := load(t)
	d := m.deployment
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want the worker only", len(pod.Containers))
	}
	c := pod.Containers[0]
	configPath := flagValue(t, c.Command, "--config")
	cfgYAML := fileFromMounts(t, m, c, configPath)
	cfg := loadConfig(t, cfgYAML)

	t.Run("probes and scraping reach the worker's endpoints", func(t *testing.T) {
		addr := flagValue(t, c.Command, "--metrics-addr")
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("--metrics-addr %q: %v", addr, err)
		}
		if host != "" && host != "0.0.0.0" {
			t.Errorf("--metrics-addr %s: the kubelet and Prometheus reach the pod's IP; listen on :%s", addr, portText)
		}
		port, _ := strconv.Atoi(portText)
		probes := []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"livenessProbe", c.LivenessProbe, metrics.HealthPath}, {"readinessProbe", c.ReadinessProbe, metrics.ReadyPath}}
		for _, p := range probes {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: want an httpGet probe of %s", p.name, p.path)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s asks %s; the worker serves it at %s", p.name, p.probe.HTTPGet.Path, p.path)
			}
			if got := containerPort(t, c, p.probe.HTTPGet.Port); got != port {
				t.Errorf("%s asks port %d; the worker serves on %d", p.name, got, port)
			}
		}
		ann := d.Spec.Template.Annotations
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != portText || ann["prometheus.io/path"] != metrics.Path {
			t.Errorf("scrape annotations %v; want scrape true, port %s, path %s", ann, portText, metrics.Path)
		}
		if slices.Contains(c.Command, "--pprof") {
			t.Error("--pprof on the scraped port serves heap profiles (row values) to the network")
		}
	})

	t.Run("memory from the budget", func(t *testing.T) {
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			t.Fatal("no memory limit: --memory-limit auto takes the heap's limit from it")
		}
		if req := c.Resources.Requests[corev1.ResourceMemory]; req.Cmp(limit) != 0 {
			t.Errorf("memory request %s, limit %s: make them equal, so the worker is not evicted under pressure", req.String(), limit.String())
		}
		need := float64(batchesInMemory*int64(cfg.Batch.MaxBytes)) / heapShare
		got := float64(limit.Value())
		if got < need || got > 1.25*need {
			t.Errorf("memory limit %s; the budget (%d batches of batch.max_bytes %s, the heap held to %.0f%% of the limit) needs %.0fMi: between it and 25%% more",
				limit.String(), batchesInMemory, cfg.Batch.MaxBytes, heapShare*100, need/(1<<20))
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Error("a CPU limit throttles the worker and delays its heartbeats; request CPU only")
		}
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
			t.Error("no CPU request")
		}
	})

	t.Run("secrets are mounted files", func(t *testing.T) {
		files := fileKeys(t, cfgYAML)
		for _, e := range c.Env {
			if strings.HasSuffix(e.Name, "_FILE") {
				files[e.Name] = e.Value
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("env %s comes from a Secret as a variable; mount it as a file", e.Name)
			}
		}
		if len(files) < 3 {
			t.Fatalf("the config names %d files; want its secrets as *_file keys", len(files))
		}
		for key, p := range files {
			v, rel := mountOf(t, m, c, p)
			if v == nil {
				t.Errorf("%s: %s is on no mounted volume", key, p)
				continue
			}
			if v.Secret == nil {
				t.Errorf("%s: %s is on volume %s, not a Secret", key, p, v.Name)
				continue
			}
			{
				if !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
					t.Errorf("%s: %s: Secret %s mounts no item at %s", key, p, v.Secret.SecretName, rel)
				}
				if mode := v.Secret.DefaultMode; mode == nil || *mode&0o007 != 0 {
					t.Errorf("Secret volume %s: defaultMode %v; others must not read it", v.Name, mode)
				}
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && len(v.Secret.Items) == 0 {
				t.Errorf("Secret volume %s lists no items: name the files the config reads", v.Name)
			}
		}
	})

	t.Run("non-root, read-only root filesystem", func(t *testing.T) {
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("pod security context %+v; want runAsNonRoot and a non-zero runAsUser", psc)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Error("the root filesystem is writable")
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Error("privilege escalation is allowed")
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Error("capabilities are not all dropped")
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Error("the pod gets a Kubernetes API token it never uses")
		}
	})

	t.Run("staging outlives the pods", func(t *testing.T) {
		// Every worker commits batches the reader (on any worker) staged; a batch lost with a pod
		// stops its table (StagedBatchMissing). With replicas, staging is a bucket or a shared volume.
		if strings.HasPrefix(cfg.Staging.URL, "s3://") {
			return
		}
		v, _ := mountOf(t, m, c, strings.TrimPrefix(cfg.Staging.URL, "file://"))
		if v == nil || v.PersistentVolumeClaim == nil {
			t.Errorf("staging.url %s is neither S3 nor on a PersistentVolumeClaim: staged batches would die with the pod", cfg.Staging.URL)
		}
	})

	t.Run("disruption budget covers the workers", func(t *testing.T) {
		sel, err := metav1.LabelSelectorAsSelector(m.pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("the PodDisruptionBudget's selector %s does not select the workers %v", sel, d.Spec.Template.Labels)
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		if mu := m.pdb.Spec.MinAvailable; mu == nil || mu.Type != intstr.Int || mu.IntVal < 1 || mu.IntVal >= replicas {
			t.Errorf("minAvailable %v with %d replicas: want at least 1 and fewer than the replicas, so a drain proceeds", mu, replicas)
		}
	})
}

// flagValue is the value after flag in args.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("the worker's command %v has no %s", args, flag)
	}
	return args[i+1]
}

// containerPort resolves a probe's port (a number or a port name) to a number.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Fatalf("port %q is not a port of container %s", p.StrVal, c.Name)
	return 0
}

// mountOf returns the volume the file at p is on and p's path inside it, nil when no mount of
// c holds p.
func mountOf(t *testing.T, m manifests, c corev1.Container, p string) (*corev1.Volume, string) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path.Clean(p), path.Clean(vm.MountPath)+"/")
		if !ok {
			continue
		}
		for i, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name {
				return &m.deployment.Spec.Template.Spec.Volumes[i], rel
			}
		}
		t.Fatalf("volume mount %s names no volume", vm.Name)
	}
	return nil, ""
}

// fileFromMounts returns the content of the file at p, which must be an item of the ConfigMap.
func fileFromMounts(t *testing.T, m manifests, c corev1.Container, p string) string {
	t.Helper()
	v, rel := mountOf(t, m, c, p)
	if v == nil || v.ConfigMap == nil || v.ConfigMap.Name != m.configMap.Name {
		t.Fatalf("%s is not on a volume of ConfigMap %s", p, m.configMap.Name)
	}
	key := rel
	for _, it := range v.ConfigMap.Items {
		if it.Path == rel {
			key = it.Key
		}
	}
	data, ok := m.configMap.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s (mounted at %s)", m.configMap.Name, key, p)
	}
	return data
}

// fileKeys returns every set key of cfgYAML that ends in _file (key path -> file path).
func fileKeys(t *testing.T, cfgYAML string) map[string]string {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal([]byte(cfgYAML), &tree); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				walk(strings.TrimPrefix(prefix+"."+k, "."), val)
			}
		case []any:
			for i, val := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), val)
			}
		case string:
			if strings.HasSuffix(prefix, config.SecretFileSuffix) {
				out[prefix] = x
			}
		}
	}
	walk("", tree)
	return out
}

// loadConfig loads cfgYAML with config.Load as the worker would, its secret files (not here)
// stood in for by files of the test.
func loadConfig(t *testing.T, cfgYAML string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	stand := map[string]string{
		"source-dsn":           "postgres://sluice:pw@db.internal:5432/shop?sslmode=verify-full&sslrootcert=/etc/sluice/secrets/postgres-ca.pem",
		"catalog-credential":   "sluice:secret",
		"s3-secret-access-key": "secret",
	}
	for key, p := range fileKeys(t, cfgYAML) {
		if !strings.HasPrefix(p, "/etc/sluice/secrets/") {
			continue // TLS files: named, read when connecting
		}
		content, ok := stand[path.Base(p)]
		if !ok {
			t.Fatalf("%s names %s, which this test has no stand-in for; add one", key, p)
		}
		local := filepath.Join(dir, path.Base(p))
		if err := os.WriteFile(local, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfgYAML = strings.ReplaceAll(cfgYAML, p, local)
	}
	f := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(f, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(f)
	if err != nil {
		t.Fatalf("the ConfigMap's config does not load: %v", err)
	}
	return cfg
}
