package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The identity, buckets and region of the stack's SeaweedFS (weed mini): one identity whose S3
// access key pair is also its OAuth2 client credential for the Iceberg REST catalog; a table
// bucket the catalog keeps its tables in (its warehouse) and a plain bucket for staging.
const (
	WeedAccessKey   = "sluice"
	WeedSecretKey   = "sluice-weed-secret"
	WeedTableBucket = "lake"
	WeedBucket      = "lake-staging"
	WeedRegion      = "us-east-1"
)

// weedIdentities is weed's S3 identity file (-s3.config): the stack's identity may do
// everything; an anonymous caller nothing, so S3 and the catalog both require credentials.
const weedIdentities = `{
  "identities": [
    {
      "name": "sluice",
      "credentials": [{"accessKey": %q, "secretKey": %q}],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    },
    {"name": "anonymous"}
  ]%s
}
`

// WeedCredentialRole is the role weed's catalog assumes to vend table-scoped S3 credentials when
// the stack's WeedVending is set.
const WeedCredentialRole = "arn:aws:iam::000000000000:role/IcebergTableAccess"

// weedVendingIAM completes weedIdentities into weed's advanced IAM file (-s3.iam.config) for
// vending: an STS signing key, and the role the catalog assumes (trusted by the catalog's own
// provider, iceberg-catalog) with S3 access, which weed narrows to one table's prefix per
// vended session.
const weedVendingIAM = `,
  "sts": {"tokenDuration": "1h", "maxSessionLength": "12h", "issuer": "seaweedfs-sts",
          "signingKey": "c2x1aWNlLWRldnN0YWNrLXN0cy1zaWduaW5nLWtleS0zMmJ5dGVz"},
  "roles": [{
    "roleName": "IcebergTableAccess", "roleArn": %q,
    "trustPolicy": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
      "Principal": {"Federated": "iceberg-catalog"}, "Action": ["sts:AssumeRoleWithCredentials"]}]},
    "attachedPolicies": ["TableAccess"]
  }],
  "policies": [{"name": "TableAccess", "document": {"Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}}]`

func (s *Stack) startWeed(ctx context.Context) (Info, error) {
	bin, err := s.tool("weed", filepath.Join(s.Cache, "bin", "weed"))
	if err != nil {
		return Info{}, err
	}
	dir := s.serviceDir(ServiceWeed)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return Info{}, fmt.Errorf("creating %s: %w", data, err)
	}
	identities := filepath.Join(dir, "identities.json")
	vending := ""
	if s.WeedVending {
		vending = fmt.Sprintf(weedVendingIAM, WeedCredentialRole)
	}
	if err := os.WriteFile(identities, []byte(fmt.Sprintf(weedIdentities, WeedAccessKey, WeedSecretKey, vending)), 0o600); err != nil {
		return Info{}, fmt.Errorf("writing %s: %w", identities, err)
	}
	// weed mini runs a master, a volume server, a filer, the S3 gateway and the Iceberg REST
	// catalog in one process, each with an HTTP and a gRPC port: all private, all on loopback.
	names := []string{"iceberg", "s3", "s3.grpc", "master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "admin", "admin.grpc"}
	// A restarted weed keeps its ports when they are free: clients keep their addresses, and the
	// master's saved topology its volume server's.
	ports := s.previousWeedPorts()
	for _, n := range names {
		if ports[n] != 0 {
			continue
		}
		if ports[n], err = freePort(); err != nil {
			return Info{}, err
		}
	}
	p := func(n string) string { return strconv.Itoa(ports[n]) }
	args := []string{
		"-logdir", dir, // glog's files (weed.INFO, ...), which go to /tmp otherwise
		"mini",
		"-dir", data,
		"-ip", "127.0.0.1", "-ip.bind", "127.0.0.1",
		"-master.port", p("master"), "-master.port.grpc", p("master.grpc"),
		"-master.telemetry=false", // the stack runs without internet access
		"-volume.port", p("volume"), "-volume.port.grpc", p("volume.grpc"),
		"-filer.port", p("filer"), "-filer.port.grpc", p("filer.grpc"),
		"-s3.port", p("s3"), "-s3.port.grpc", p("s3.grpc"),
		"-s3.port.iceberg", p("iceberg"), "-s3.port.lance=0",
		"-s3.config", identities,
		"-s3.externalUrl", "http://127.0.0.1:" + p("s3"),
		"-admin.port", p("admin"), "-admin.port.grpc", p("admin.grpc"), "-admin.port.legacy=0",
		"-webdav=false",
		"-tableBucket", WeedTableBucket,
		"-bucket", WeedBucket,
	}
	if s.WeedVending {
		args = append(args, "-s3.iam.config", identities, "-s3.iceberg.credentialRole", WeedCredentialRole)
	}
	logPath := filepath.Join(dir, "weed.log")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if err := spawn(cmd, logPath); err != nil {
		return Info{}, err
	}
	info := Info{
		Service: ServiceWeed,
		PID:     cmd.Process.Pid,
		Log:     logPath,
		Addr:    "127.0.0.1:" + p("iceberg"),
		URL:     "http://127.0.0.1:" + p("iceberg"),
		Extra: map[string]string{
			"s3_endpoint":       "http://127.0.0.1:" + p("s3"),
			"region":            WeedRegion,
			"access_key_id":     WeedAccessKey,
			"secret_access_key": WeedSecretKey,
			"table_bucket":      WeedTableBucket,
			"bucket":            WeedBucket,
			"master":            "127.0.0.1:" + p("master") + "." + p("master.grpc"),
		},
		Started: time.Now().UTC(),
	}
	for _, n := range names {
		info.Extra["port."+n] = p(n)
	}
	if err := waitReady(ctx, info, weedReady); err != nil {
		_ = s.stopInfo(info)
		return Info{}, err
	}
	return info, nil
}

// previousWeedPorts are the ports weed last listened on, those free again, by name.
func (s *Stack) previousWeedPorts() map[string]int {
	ports := map[string]int{}
	info, err := s.readState(ServiceWeed)
	if err != nil || alive(info.PID) {
		return ports
	}
	for k, v := range info.Extra {
		name, ok := strings.CutPrefix(k, "port.")
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", v))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports[name], _ = strconv.Atoi(v)
	}
	return ports
}

// weedReady checks what a pipeline needs of weed: the S3 port accepts connections, and the
// catalog issues a token for the stack's credential and lists the namespaces of the table
// bucket with it (the bucket exists).
func weedReady(ctx context.Context, info Info) error {
	s3, err := url.Parse(info.Extra["s3_endpoint"])
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s3.Host)
	if err != nil {
		return fmt.Errorf("s3 gateway: %w", err)
	}
	_ = conn.Close()
	token, err := WeedToken(ctx, info.URL, info.Extra["access_key_id"], info.Extra["secret_access_key"])
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.URL+"/v1/"+info.Extra["table_bucket"]+"/namespaces", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("listing the catalog's namespaces: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("listing the namespaces of table bucket %s: %s: %s", info.Extra["table_bucket"], resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// WeedToken exchanges an S3 access key pair for a bearer token of the Iceberg REST catalog at
// uri (OAuth2 client credentials, POST /v1/oauth/tokens).
func WeedToken(ctx context.Context, uri, accessKey, secretKey string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {accessKey}, "client_secret": {secretKey}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, uri+"/v1/oauth/tokens", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("requesting a catalog token: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("requesting a catalog token: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("requesting a catalog token: no access_token in %q", b)
	}
	return tok.AccessToken, nil
}
