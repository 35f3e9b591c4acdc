package devstack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Couchbase credentials and bucket that gocaves serves in mock-only mode.
const (
	CouchbaseUser     = "Administrator"
	CouchbasePassword = "password"
	CouchbaseBucket   = "default"
)

// logCapBytes is how much of gocaves' output its log keeps.
const logCapBytes = 16 << 20

// logEndBytes is how much of the end of gocaves' output is kept once it exits.
const logEndBytes = 256 << 10

func (s *Stack) startCouchbase(ctx context.Context) (Info, error) {
	bin, err := s.tool("gocaves", filepath.Join(s.Cache, "bin", "gocaves"))
	if err != nil {
		return Info{}, err
	}
	dir := s.serviceDir(ServiceCouchbase)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Info{}, fmt.Errorf("creating %s: %w", dir, err)
	}
	logPath := filepath.Join(dir, "gocaves.log")
	_ = os.Remove(logPath) // the connection string is read from a fresh log
	_ = os.Remove(logPath + ".end")
	// gocaves logs every packet it receives (GBs under a benchmark). Our build of it discards
	// that log unless GOCAVES_PACKET_LOG=1 (scripts/gocaves/main.go); either way its output goes
	// through dd, which passes the first logCapBytes on as they come (the connection
	// string is in the first lines; head would buffer it), then tail keeps only the last
	// logEndBytes of the rest and writes them to gocaves.log.end when gocaves exits (a crash's
	// stack trace; Ensure's restart record quotes it), so the mock never blocks on a full pipe.
	// The shell leads its own process group, which Stop signals as a whole.
	cmd := exec.Command("/bin/sh", "-c",
		fmt.Sprintf(`"$0" --mock-only 2>&1 | { dd bs=64k iflag=count_bytes count=%d status=none; echo; echo "[gocaves log capped at %d bytes by devstack]"; tail -c %d > gocaves.log.end; }`, logCapBytes, logCapBytes, logEndBytes),
		bin)
	cmd.Dir = dir
	if err := spawn(cmd, logPath); err != nil {
		return Info{}, err
	}
	info := Info{
		Service: ServiceCouchbase,
		PID:     cmd.Process.Pid,
		Log:     logPath,
		Extra:   map[string]string{"username": CouchbaseUser, "password": CouchbasePassword, "bucket": CouchbaseBucket},
		Started: time.Now().UTC(),
	}
	// gocaves picks random ports and prints {"connstr":"couchbase://127.0.0.1:P1,..."} once ready.
	err = waitReady(ctx, info, func(ctx context.Context, i Info) error {
		connstr, err := gocavesConnstr(logPath)
		if err != nil {
			return err
		}
		info.URL = connstr
		info.Addr = strings.SplitN(strings.TrimPrefix(connstr, "couchbase://"), ",", 2)[0]
		return couchbaseReady(ctx, info)
	})
	if err != nil {
		_ = s.stopInfo(info)
		return Info{}, err
	}
	return info, nil
}

// gocavesConnstr finds the connection string gocaves printed in its log.
func gocavesConnstr(logPath string) (string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"connstr"`) {
			continue
		}
		var msg struct {
			Connstr string `json:"connstr"`
		}
		if i := strings.IndexByte(line, '{'); i >= 0 && json.Unmarshal([]byte(line[i:]), &msg) == nil && msg.Connstr != "" {
			return msg.Connstr, nil
		}
	}
	return "", fmt.Errorf("gocaves has not printed its connection string yet")
}

func couchbaseReady(ctx context.Context, info Info) error {
	if info.Addr == "" {
		return fmt.Errorf("no address recorded")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", info.Addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
