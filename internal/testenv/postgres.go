package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// pgNeed names what Postgres needs, for Lack.
const pgNeed = "PostgreSQL's initdb and pg_ctl (Debian's postgresql package; scripts/install-packages installs it)"

// A PostgreSQL server for one test binary, made by the first Postgres call
// and stopped by PostgresMain.
var pg struct {
	once  sync.Once
	dir   string // its data directory, socket and log
	ctl   string // pg_ctl
	cred  *syscall.Credential
	admin *sql.DB
	err   error
	n     atomic.Int64
}

// Postgres returns the URL of a new, empty database on a PostgreSQL server
// the tests started themselves in a temporary directory, listening on a
// Unix socket only. The package's TestMain must run its tests with
// PostgresMain, which stops the server.
func Postgres(t testing.TB) string {
	t.Helper()
	pg.once.Do(startPostgres)
	if pg.err == errNoPostgres {
		Lack(t, pgNeed)
	}
	if pg.err != nil {
		t.Fatalf("start PostgreSQL for the tests: %v", pg.err)
	}
	name := fmt.Sprintf("t%d", pg.n.Add(1))
	if _, err := pg.admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return pgURL(name)
}

// PostgresMain runs m's tests and stops the server Postgres started, if it
// did: func TestMain(m *testing.M) { os.Exit(testenv.PostgresMain(m)) }.
func PostgresMain(m *testing.M) int {
	code := m.Run()
	if pg.dir != "" {
		if pg.admin != nil {
			pg.admin.Close()
		}
		pgCommand(pg.ctl, "stop", "-D", filepath.Join(pg.dir, "data"), "-m", "immediate").Run()
		os.RemoveAll(pg.dir)
	}
	return code
}

var errNoPostgres = fmt.Errorf("no PostgreSQL")

func pgURL(db string) string {
	return "postgres://kndl@/" + db + "?host=" + url.QueryEscape(pg.dir)
}

// pgBin finds the newest of Debian's PostgreSQL installs, or one on PATH.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", errNoPostgres
	}
	return filepath.Dir(p), nil
}

func pgMajor(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

func startPostgres() {
	bin, err := pgBin()
	if err != nil {
		pg.err = err
		return
	}
	pg.ctl = filepath.Join(bin, "pg_ctl")
	// Short, for the socket's path: a Unix socket's is at most 107 bytes.
	if pg.dir, pg.err = os.MkdirTemp("", "kndl-pg-"); pg.err != nil {
		return
	}
	// initdb and postgres refuse to run as root: as root, run them as an
	// unprivileged user owning the directory.
	if os.Geteuid() == 0 {
		if pg.cred, pg.err = unprivileged(); pg.err != nil {
			return
		}
		if pg.err = os.Chown(pg.dir, int(pg.cred.Uid), int(pg.cred.Gid)); pg.err != nil {
			return
		}
	}
	data := filepath.Join(pg.dir, "data")
	// Locale C sorts text by its bytes, as SQLite does, so both engines
	// order names alike in the tests.
	if out, err := pgCommand(filepath.Join(bin, "initdb"), "-D", data, "-U", "kndl", "--auth=trust", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		pg.err = fmt.Errorf("initdb: %v: %s", err, out)
		return
	}
	// Durability is not what tests measure: no fsync makes each database
	// made and each commit cheap.
	opts := fmt.Sprintf("-c listen_addresses='' -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off", pg.dir)
	if out, err := pgCommand(pg.ctl, "start", "-w", "-D", data, "-l", filepath.Join(pg.dir, "log"), "-o", opts).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		pg.err = fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
		return
	}
	pg.admin, pg.err = sql.Open("pgx", pgURL("postgres"))
	if pg.err == nil {
		pg.err = pg.admin.PingContext(context.Background())
	}
}

// pgCommand runs a PostgreSQL program, as pg.cred's user if set.
func pgCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = pg.dir
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	return cmd
}

// unprivileged is the postgres user Debian's package makes, or nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, and no postgres or nobody user to run PostgreSQL as (initdb refuses root)")
}
