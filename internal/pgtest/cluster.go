package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Cluster is a throwaway PostgreSQL server of one test's own, on loopback,
// which the test may restart, stop and pause (a database that misbehaves
// under a running program). NewCluster starts it with the installed server
// binaries (STEPWISE_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin,
// else pg_config --bindir) as ./scripts/test does; as root it runs the
// server as the postgres user. The test's end stops it and removes its
// files.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	as   []string // runuser prefix when root

	mu     sync.Mutex
	paused []int // pids stopped by Pause
}

// NewCluster initialises and starts a cluster. Without server binaries the
// test is skipped, or fails under STEPWISE_REQUIRE_POSTGRES=1.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := binDir()
	if bin == "" {
		const how = "no PostgreSQL server binaries (initdb, pg_ctl): install them or set STEPWISE_PG_BINDIR"
		if os.Getenv("STEPWISE_REQUIRE_POSTGRES") == "1" {
			t.Fatal("STEPWISE_REQUIRE_POSTGRES=1: " + how)
		}
		t.Skip(how)
	}
	dir, err := os.MkdirTemp("", "stepwise-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, dir: dir}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root: a postgres user is needed to run the server: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	t.Cleanup(func() {
		c.Resume()
		_ = c.ctl("-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if out, err := c.cmd(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "stepwise", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	for range 8 {
		c.port = freePort(t)
		if err := c.Start(); err == nil {
			return c
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	t.Fatalf("the PostgreSQL cluster did not start:\n%s", log)
	return nil
}

func binDir() string {
	if b := os.Getenv("STEPWISE_PG_BINDIR"); b != "" {
		return b
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	if len(dirs) > 0 {
		return dirs[len(dirs)-1]
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return ""
}

func version(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) cmd(name string, args ...string) *exec.Cmd {
	all := append(append(append([]string(nil), c.as...), name), args...)
	return exec.Command(all[0], all[1:]...)
}

func (c *Cluster) ctl(args ...string) error {
	args = append([]string{"-D", c.data()}, args...)
	out, err := c.cmd(filepath.Join(c.bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// DSN is the cluster's connection string.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://stepwise@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the stopped cluster on its port and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	return c.ctl("-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200", c.port, c.dir),
		"-l", filepath.Join(c.dir, "log"), "-w", "start")
}

// Stop stops the cluster at once, as a crash of the database would
// (immediate shutdown: every connection is cut, nothing is checkpointed).
func (c *Cluster) Stop() error { return c.ctl("-m", "immediate", "-w", "stop") }

// Restart stops the cluster at once and starts it again on the same port.
func (c *Cluster) Restart() error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.Start()
}

// Pause stops every process of the cluster (SIGSTOP of the postmaster and
// its children): connections stay open and new ones are accepted by the
// kernel, but nothing answers, as a database host that stalls. Resume
// continues them.
func (c *Cluster) Pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		return nil
	}
	pids, err := c.pids()
	if err != nil {
		return err
	}
	// The postmaster first, so that it forks no child after the scan.
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("SIGSTOP %d: %w", pid, err)
		}
	}
	// Children forked between the scan and the postmaster's stop.
	more, err := c.pids()
	if err != nil {
		return err
	}
	for _, pid := range more[1:] {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	c.paused = more
	return nil
}

// Resume continues the processes Pause stopped.
func (c *Cluster) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range c.paused {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	c.paused = nil
}

// pids returns the postmaster's pid, then its children's.
func (c *Cluster) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("the cluster is not running: %w", err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return nil, fmt.Errorf("postmaster.pid: %w", err)
	}
	out := []int{pm}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(pm) {
			continue
		}
		pid, err := strconv.Atoi(strings.Fields(s)[0])
		if err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}
