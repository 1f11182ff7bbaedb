// Package pgtest starts throwaway PostgreSQL clusters from the machine's
// server binaries: a primary and streaming replicas, each on its own
// loopback address and the same port, so that DNS answers carry real,
// distinct A records. It works as root (the servers run as the postgres
// user) and as an ordinary user.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options describe a cluster to start.
type Options struct {
	// IPs of the nodes: the first is the primary, the others replicas.
	IPs  []string
	Port int // default 5432
	// Ports, when set, gives node i the port Ports[i] (0: Port), so that
	// two nodes may share an IP or a cluster span several ports.
	Ports []int

	// Conf lines appended to every node's postgresql.conf.
	Conf []string

	// HBA lines put before the trust rules of pg_hba.conf, e.g. to demand
	// a password from one user.
	HBA []string

	// Files written into the primary's data directory before it first
	// starts (mode 0600, owned by the server's user), such as a TLS
	// certificate and key that Conf names; replicas copy them.
	Files map[string][]byte

	// Listen, when set, gives the addresses each node listens on besides
	// its own IP (the soak gives every path to a node an address of its
	// own, so that a packet filter can cut one path and not the others).
	Listen func(ip string) []string
	// Upstream, when set, is the host a replica at ip puts in its
	// primary_conninfo to stream from the node at upstream (default
	// upstream itself).
	Upstream func(ip, upstream string) string
}

// Cluster is a running primary and its replicas.
type Cluster struct {
	Nodes []*Node // Nodes[0] started as the primary
	root  string
	bin   string
	owner *user.User // nil when not root
	opts  Options
	// backupStep bounds one pg_basebackup (baseBackup); zero:
	// baseBackupStep. Tests of the bound set it shorter.
	backupStep time.Duration
}

// Node is one PostgreSQL server.
type Node struct {
	Name string
	IP   string
	Port int
	Dir  string
	c    *Cluster
}

// Addr is "ip:port".
func (n *Node) Addr() string { return n.IP + ":" + strconv.Itoa(n.Port) }

// DSN is a libpq keyword/value string for the node.
func (n *Node) DSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", n.IP, n.Port)
}

// BinDir finds the PostgreSQL server binaries: $PG_BINDIR, pg_config
// --bindir, or the Debian layout.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; install postgresql or set PG_BINDIR")
}

// Start initialises and starts a cluster. On error, whatever was started is
// stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if len(opts.IPs) == 0 {
		return nil, errors.New("pgtest: no IPs")
	}
	if opts.Port == 0 {
		opts.Port = 5432
	}
	c, err := newCluster("pgtest-")
	if err != nil {
		return nil, err
	}
	c.opts = opts
	for i, ip := range opts.IPs {
		port := opts.Port
		if i < len(opts.Ports) && opts.Ports[i] != 0 {
			port = opts.Ports[i]
		}
		c.Nodes = append(c.Nodes, &Node{
			Name: "node" + strconv.Itoa(i+1) + "_" + strings.ReplaceAll(ip, ".", "_"),
			IP:   ip, Port: port, Dir: filepath.Join(c.root, "node"+strconv.Itoa(i+1)), c: c,
		})
	}
	if err := c.startAll(ctx, opts); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startAll(ctx context.Context, opts Options) error {
	p := c.Nodes[0]
	if _, err := c.run(ctx, "initdb", "-D", p.Dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return err
	}
	hba := strings.Join(opts.HBA, "\n") + "\nhost all all 127.0.0.0/8 trust\nhost replication all 127.0.0.0/8 trust\nhost all all ::1/128 trust\nhost replication all ::1/128 trust\n"
	if err := os.WriteFile(filepath.Join(p.Dir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	if err := c.chown(filepath.Join(p.Dir, "pg_hba.conf")); err != nil {
		return err
	}
	for name, data := range opts.Files {
		path := filepath.Join(p.Dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		if err := c.chown(path); err != nil {
			return err
		}
	}
	base := append([]string{
		"unix_socket_directories = ''",
		"fsync = off",
		"full_page_writes = off",
		"wal_level = replica",
		"max_wal_senders = 10",
		"hot_standby = on",
		"hot_standby_feedback = on",
		"wal_receiver_status_interval = 1s",
		// A replica stopped for a while by a test must find the WAL it
		// missed: checkpoints would otherwise recycle it under load.
		"wal_keep_size = 256MB",
		"shared_buffers = 16MB",
		"max_connections = 50",
		"logging_collector = off",
	}, opts.Conf...)
	if err := c.appendFile(filepath.Join(p.Dir, "postgresql.conf"), strings.Join(base, "\n")+"\n"+p.ownConf()); err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	// Replicas copy the primary, then start in parallel.
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, r := range c.Nodes[1:] {
		if err := c.baseBackup(ctx, p, r.Dir, "-R"); err != nil {
			return err
		}
		if err := c.appendFile(filepath.Join(r.Dir, "postgresql.conf"), r.ownConf()); err != nil {
			return err
		}
		if opts.Upstream != nil {
			if err := c.appendFile(filepath.Join(r.Dir, "postgresql.auto.conf"), r.conninfo(p)+"\n"); err != nil {
				return err
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Start(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ownConf is the node's own part of postgresql.conf; later lines win, so it
// overrides what a replica copied from the primary.
func (n *Node) ownConf() string {
	listen := n.IP
	if n.c.opts.Listen != nil {
		listen = strings.Join(append([]string{n.IP}, n.c.opts.Listen(n.IP)...), ",")
	}
	return fmt.Sprintf("listen_addresses = '%s'\nport = %d\ncluster_name = '%s'\n", listen, n.Port, n.Name)
}

// Start starts the node's server and waits until it accepts connections.
// A failure carries the end of the server's log, which says why (pg_ctl
// says only "Examine the log output", and Close removes the log).
func (n *Node) Start(ctx context.Context) error {
	_, err := n.c.run(ctx, "pg_ctl", "-D", n.Dir, "-l", n.Dir+".log", "-w", "-t", "60", "start")
	if err != nil && ctx.Err() == nil {
		lines := strings.Split(strings.TrimSpace(n.Log()), "\n")
		err = fmt.Errorf("%w\nthe end of %s's log:\n%s", err, n.Addr(), strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	return err
}

// Stop stops the node's server; mode is "smart", "fast" or "immediate".
// pg_ctl gives up after 60 s (a smart stop waits for every session to end).
func (n *Node) Stop(ctx context.Context, mode string) error {
	_, err := n.c.run(ctx, "pg_ctl", "-D", n.Dir, "-m", mode, "-w", "-t", "60", "stop")
	return err
}

// Promote turns a replica into a primary and waits until it is writable.
func (n *Node) Promote(ctx context.Context) error {
	_, err := n.c.run(ctx, "pg_ctl", "-D", n.Dir, "-w", "-t", "60", "promote")
	return err
}

// Signal sends sig to the node's postmaster and all its backends: SIGSTOP
// freezes the server (it accepts TCP, answers nothing), SIGCONT thaws it.
func (n *Node) Signal(sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(n.Dir, "postmaster.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return err
	}
	// Children first when stopping, parent first when continuing, so that
	// the postmaster never sees a child change state under it.
	if sig == syscall.SIGCONT {
		if err := syscall.Kill(pid, sig); err != nil {
			return err
		}
	}
	_ = exec.Command("pkill", "-"+strconv.Itoa(int(sig)), "-P", strconv.Itoa(pid)).Run()
	if sig != syscall.SIGCONT {
		return syscall.Kill(pid, sig)
	}
	return nil
}

// Log returns the node's server log, for failure messages.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.Dir + ".log")
	return string(b)
}

// Close stops every node at once and removes the cluster's files.
func (c *Cluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if _, err := os.Stat(filepath.Join(n.Dir, "postmaster.pid")); err == nil {
			_ = n.Stop(ctx, "immediate")
		}
	}
	if c.root != "" {
		_ = os.RemoveAll(c.root)
	}
}

// run runs a PostgreSQL binary, as postgres when we are root.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.owner != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Each step runs in a process group of its own: a Ctrl-C at the
	// terminal reaches only us, and we stop the whole step, runuser and
	// all, with SIGINT, which pg_ctl start passes on to the server it is
	// starting. Killing runuser alone would leave its child running on,
	// to start a server or write a data directory after Close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	// pg_ctl start leaves the server running with our pipes open; don't
	// wait for it to close them. A step still running this long after
	// SIGINT is killed.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil && ctx.Err() != nil {
		// Whatever of the step is left (a child of a killed runuser).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil && ctx.Err() != nil {
		// Stopped by us (exit status 130: our SIGINT), not failed: say so,
		// and after how long, rather than leave an exit status to decode.
		return out.String(), fmt.Errorf("%s %s: stopped by pgtest after %v, its context ended (%w): %v\n%s",
			name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond), ctx.Err(), err, out.String())
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func (c *Cluster) chown(path string) error {
	if c.owner == nil {
		return nil
	}
	uid, _ := strconv.Atoi(c.owner.Uid)
	gid, _ := strconv.Atoi(c.owner.Gid)
	return os.Chown(path, uid, gid)
}

func (c *Cluster) appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// QueryOnce runs sql on the node and scans one row into dest.
func (n *Node) QueryOnce(ctx context.Context, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// newCluster finds the binaries and makes the root directory, owned by
// the user the servers will run as.
func newCluster(prefix string) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if c.owner, err = userPostgres(); err != nil {
			return nil, err
		}
	}
	// Not t.TempDir: its parents are private to root, and the servers run
	// as postgres.
	if c.root, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	if err := c.chown(c.root); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func userPostgres() (*user.User, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	return u, nil
}

// WriteFile writes data to name in the node's data directory (mode 0600,
// owned by the server's user), such as a certificate of its own; the
// server reads it at its next start or reload (pg_reload_conf()).
func (n *Node) WriteFile(name string, data []byte) error {
	path := filepath.Join(n.Dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return n.c.chown(path)
}
