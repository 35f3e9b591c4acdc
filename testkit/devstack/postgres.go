package devstack

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBin is where Debian installs PostgreSQL 15's server binaries.
const pgBin = "/usr/lib/postgresql/15/bin"

// postgresSettings are the server settings of the private cluster: logical decoding on, and
// durability traded for speed (a test cluster's data is disposable). synchronous_commit stays
// on: with it off, commits reach logical decoding only after the WAL writer flushes them.
var postgresSettings = []string{
	"wal_level=logical",
	"max_wal_senders=40",
	"max_replication_slots=40",
	"max_connections=200",
	"fsync=off",
	"full_page_writes=off",
	"shared_buffers=256MB",
	"max_wal_size=4GB",
	"wal_sender_timeout=60s",
	"logical_decoding_work_mem=64MB",
	"listen_addresses=127.0.0.1",
	"log_min_messages=warning",
}

func (s *Stack) startPostgres(ctx context.Context) (Info, error) {
	postgres, err := s.tool("postgres", filepath.Join(pgBin, "postgres"))
	if err != nil {
		return Info{}, err
	}
	initdb := filepath.Join(filepath.Dir(postgres), "initdb")
	dir := s.serviceDir(ServicePostgres)
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{dir, sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Info{}, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	cred, err := serverCredential(dir)
	if err != nil {
		return Info{}, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		_ = os.RemoveAll(data)
		if err := chownAll(cred, dir, sock); err != nil {
			return Info{}, err
		}
		cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "--auth=trust",
			"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			return Info{}, fmt.Errorf("initdb %s: %w\n%s", data, err, out)
		}
	}
	// A stale pid file from a killed server would stop the new one from starting.
	_ = os.Remove(filepath.Join(data, "postmaster.pid"))
	port := s.previousPort(ServicePostgres) // a restarted server keeps its address
	if port == 0 {
		if port, err = freePort(); err != nil {
			return Info{}, err
		}
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", sock}
	for _, set := range append(append([]string(nil), postgresSettings...), s.PostgresSettings...) {
		args = append(args, "-c", set)
	}
	cmd := exec.Command(postgres, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := spawn(cmd, logPath); err != nil {
		return Info{}, err
	}
	info := Info{
		Service: ServicePostgres,
		PID:     cmd.Process.Pid,
		Log:     logPath,
		Addr:    fmt.Sprintf("127.0.0.1:%d", port),
		URL:     fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Extra:   map[string]string{"data": data, "socket_dir": sock, "bin": filepath.Dir(postgres)},
		Started: time.Now().UTC(),
	}
	if err := waitReady(ctx, info, postgresReady); err != nil {
		_ = s.stopInfo(info)
		return Info{}, err
	}
	return info, nil
}

func postgresReady(ctx context.Context, info Info) error {
	conn, err := pgx.Connect(ctx, info.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return err
	}
	if level != "logical" {
		return fmt.Errorf("wal_level is %s, want logical", level)
	}
	return nil
}

// serverCredential returns the credential PostgreSQL runs under: the postgres user when this
// process is root (the server refuses to run as root), nil (the current user) otherwise.
func serverCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The server must reach its directory: make every parent traversable.
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
				return nil, fmt.Errorf("making %s traversable for the postgres user: %w", d, err)
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chownAll(cred *syscall.Credential, dirs ...string) error {
	if cred == nil {
		return nil
	}
	for _, d := range dirs {
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("giving %s to the postgres user: %w", d, err)
		}
	}
	return nil
}

// FreshDatabase drops the database name on the server of adminDSN (ending every replication
// slot of it first, active or not) and creates it anew, and returns its DSN: the benchmark and
// the Web UI screenshot start from an empty database each time.
func FreshDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL", name)
	_, _ = admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1", name)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
