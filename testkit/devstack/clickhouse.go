package devstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// clickhouseConfig is a complete server config for a private ClickHouse instance: loopback only,
// private ports, every path under the service directory. It is generated rather than copied from
// /etc so that the packaged server's paths and ports are never touched. The same file works for
// Debian's 18.16 and for current servers.
var clickhouseConfig = template.Must(template.New("config").Parse(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{{.Dir}}/clickhouse-server.log</log>
        <errorlog>{{.Dir}}/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{{.TCPPort}}</tcp_port>
    <http_port>{{.HTTPPort}}</http_port>
    <interserver_http_port>{{.InterserverPort}}</interserver_http_port>
    <max_connections>1024</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>1073741824</uncompressed_cache_size>
    <mark_cache_size>536870912</mark_cache_size>
    <path>{{.Dir}}/data/</path>
    <tmp_path>{{.Dir}}/tmp/</tmp_path>
    <user_files_path>{{.Dir}}/user_files/</user_files_path>
    <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
    <users_config>{{.Dir}}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>
</yandex>
`))

var clickhouseUsers = `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`

func (s *Stack) startClickHouse(ctx context.Context) (Info, error) {
	bin, err := s.tool("clickhouse-server", "/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server")
	if err != nil {
		return Info{}, err
	}
	dir := s.serviceDir(ServiceClickHouse)
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return Info{}, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	var p struct {
		Dir                                string
		TCPPort, HTTPPort, InterserverPort int
	}
	p.Dir = dir
	p.TCPPort = s.previousPort(ServiceClickHouse) // a restarted server keeps its address
	for _, port := range []*int{&p.TCPPort, &p.HTTPPort, &p.InterserverPort} {
		if *port != 0 {
			continue
		}
		if *port, err = freePort(); err != nil {
			return Info{}, err
		}
	}
	cfgPath := filepath.Join(dir, "config.xml")
	f, err := os.Create(cfgPath)
	if err != nil {
		return Info{}, fmt.Errorf("writing %s: %w", cfgPath, err)
	}
	err = clickhouseConfig.Execute(f, p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Info{}, fmt.Errorf("writing %s: %w", cfgPath, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(clickhouseUsers), 0o644); err != nil {
		return Info{}, fmt.Errorf("writing users.xml: %w", err)
	}
	logPath := filepath.Join(dir, "clickhouse-server.err.log")
	cmd := exec.Command(bin, "--config-file="+cfgPath)
	cmd.Dir = dir
	if err := spawn(cmd, filepath.Join(dir, "stdout.log")); err != nil {
		return Info{}, err
	}
	info := Info{
		Service: ServiceClickHouse,
		PID:     cmd.Process.Pid,
		Log:     logPath,
		Addr:    fmt.Sprintf("127.0.0.1:%d", p.TCPPort),
		URL:     fmt.Sprintf("clickhouse://127.0.0.1:%d/default", p.TCPPort),
		Extra:   map[string]string{"http": fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), "config": cfgPath},
		Started: time.Now().UTC(),
	}
	if err := waitReady(ctx, info, clickhouseReady); err != nil {
		_ = s.stopInfo(info)
		return Info{}, err
	}
	return info, nil
}

func clickhouseReady(ctx context.Context, info Info) error {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{info.Addr},
		Protocol:    clickhouse.Native,
		DialTimeout: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Ping(ctx)
}
