package pgtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// PatroniCluster is etcd and PostgreSQL nodes managed by Patroni, from
// Debian's patroni and etcd-server packages.
type PatroniCluster struct {
	Nodes  []*PatroniNode
	Scope  string
	root   string
	etcd   *exec.Cmd
	bin    string
	c      *Cluster // for run/chown as postgres
	config []string // Patroni config file of each node
	etcdIP string
}

// PatroniNode is one Patroni-managed server.
type PatroniNode struct {
	Name    string // also its location: each node has the tag dc: <Name>
	IP      string
	APIURL  string // http://ip:8008
	Dir     string // PostgreSQL data directory
	patroni *exec.Cmd
}

// Addr is the node's PostgreSQL "ip:5432".
func (n *PatroniNode) Addr() string { return n.IP + ":5432" }

// StartPatroni starts etcd on etcdIP and a Patroni node on each of ips
// (ttl 10, loop_wait 1) and waits until there is a leader and every other
// node streams from it.
func StartPatroni(ctx context.Context, etcdIP string, ips []string) (*PatroniCluster, error) {
	for _, tool := range []string{"patroni", "patronictl", "etcd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: install the Debian packages patroni and etcd-server", tool)
		}
	}
	c, err := newCluster("patroni-")
	if err != nil {
		return nil, err
	}
	pc := &PatroniCluster{Scope: "pgdns", root: c.root, bin: c.bin, c: c}

	etcdURL := "http://" + etcdIP + ":2379"
	pc.etcd = exec.Command("etcd", "--name", "e1", "--data-dir", filepath.Join(pc.root, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://"+etcdIP+":2380", "--initial-advertise-peer-urls", "http://"+etcdIP+":2380",
		"--initial-cluster", "e1=http://"+etcdIP+":2380", "--log-level", "error")
	pc.etcd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	etcdLog, _ := os.Create(filepath.Join(pc.root, "etcd.log"))
	pc.etcd.Stdout, pc.etcd.Stderr = etcdLog, etcdLog
	if err := pc.etcd.Start(); err != nil {
		pc.Close()
		return nil, err
	}

	pc.etcdIP = etcdIP
	for _, ip := range ips {
		if _, err := pc.AddNode(ip); err != nil {
			pc.Close()
			return nil, err
		}
	}
	if err := pc.WaitHealthy(ctx, len(ips)); err != nil {
		pc.Close()
		return nil, err
	}
	return pc, nil
}

// AddNode starts one more Patroni node on ip; it joins the cluster as a
// replica (Patroni copies the leader with pg_basebackup).
func (pc *PatroniCluster) AddNode(ip string) (*PatroniNode, error) {
	i := len(pc.Nodes) + 1
	n := &PatroniNode{Name: "node" + strconv.Itoa(i), IP: ip, APIURL: "http://" + ip + ":8008",
		Dir: filepath.Join(pc.root, "node"+strconv.Itoa(i), "data")}
	if err := os.MkdirAll(filepath.Dir(n.Dir), 0o700); err != nil {
		return nil, err
	}
	if err := pc.c.chown(filepath.Dir(n.Dir)); err != nil {
		return nil, err
	}
	conf := filepath.Join(filepath.Dir(n.Dir), "patroni.yml")
	if err := os.WriteFile(conf, []byte(patroniConfig(pc.Scope, n, pc.etcdIP, pc.bin)), 0o644); err != nil {
		return nil, err
	}
	pc.config = append(pc.config, conf)
	pc.Nodes = append(pc.Nodes, n)
	return n, pc.startNode(n, conf)
}

func patroniConfig(scope string, n *PatroniNode, etcdIP, bin string) string {
	return fmt.Sprintf(`scope: %s
name: %[2]s
tags: {dc: %[2]s}
log: {level: WARNING}
restapi:
  listen: %s:8008
  connect_address: %s:8008
etcd3:
  hosts: %s:2379
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: false
      parameters: {wal_level: replica, hot_standby: "on", max_wal_senders: 10, max_replication_slots: 10, wal_keep_size: 128MB}
  initdb: [{encoding: UTF8}, {locale: C}]
  pg_hba:
    - host replication all 127.0.0.0/8 trust
    - host all all 127.0.0.0/8 trust
postgresql:
  listen: %s:5432
  connect_address: %s:5432
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
  parameters: {unix_socket_directories: '%s', fsync: "off"}
`, scope, n.Name, n.IP, n.IP, etcdIP, n.IP, n.IP, n.Dir, bin, filepath.Join(filepath.Dir(n.Dir), "pgpass"), filepath.Dir(n.Dir))
}

// startNode starts the node's Patroni as postgres.
func (pc *PatroniCluster) startNode(n *PatroniNode, conf string) error {
	args := []string{"patroni", conf}
	if pc.c.owner != nil {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(filepath.Dir(n.Dir), "patroni.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	n.patroni = cmd
	return nil
}

// Member is a node as Patroni's /cluster reports it.
type Member struct {
	Name, Host, Role, State string
	Timeline                int
}

// Members asks any node's /cluster.
func (pc *PatroniCluster) Members(ctx context.Context) ([]Member, error) {
	var last error
	for _, n := range pc.Nodes {
		req, _ := http.NewRequestWithContext(ctx, "GET", n.APIURL+"/cluster", nil)
		resp, err := (&http.Client{Timeout: time.Second}).Do(req)
		if err != nil {
			last = err
			continue
		}
		var body struct{ Members []Member }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err == nil {
			return body.Members, nil
		}
		last = err
	}
	return nil, last
}

// Leader returns the node holding the leader lock, or nil.
func (pc *PatroniCluster) Leader(ctx context.Context) *PatroniNode {
	ms, err := pc.Members(ctx)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return pc.node(m.Name)
		}
	}
	return nil
}

func (pc *PatroniCluster) node(name string) *PatroniNode {
	for _, n := range pc.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitHealthy waits until there is a running leader and want-1 streaming
// replicas.
func (pc *PatroniCluster) WaitHealthy(ctx context.Context, want int) error {
	var ms []Member
	if testkit.Poll(90*time.Second, 250*time.Millisecond, func() bool {
		ms, _ = pc.Members(ctx)
		leaders, streaming := 0, 0
		for _, m := range ms {
			switch {
			case m.Role == "leader" && m.State == "running":
				leaders++
			case m.Role == "replica" && (m.State == "streaming" || m.State == "running"):
				streaming++
			}
		}
		return leaders == 1 && streaming == want-1
	}) {
		return nil
	}
	return fmt.Errorf("patroni cluster not healthy: %+v\n%s", ms, pc.Logs())
}

// Switchover asks Patroni to move the leader to candidate; it returns when
// patronictl does.
func (pc *PatroniCluster) Switchover(ctx context.Context, candidate *PatroniNode) error {
	leader := pc.Leader(ctx)
	if leader == nil {
		return errors.New("no leader to switch over from")
	}
	cmd := exec.CommandContext(ctx, "patronictl", "-c", pc.config[0], "switchover", pc.Scope,
		"--leader", leader.Name, "--candidate", candidate.Name, "--force")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("patronictl switchover: %w\n%s", err, out)
	}
	return nil
}

// Kill ends a node's Patroni with SIGKILL and stops its PostgreSQL at once,
// as a crashed machine would: the leader key expires after ttl.
func (pc *PatroniCluster) Kill(ctx context.Context, n *PatroniNode) error {
	if n.patroni != nil && n.patroni.Process != nil {
		_ = syscall.Kill(-n.patroni.Process.Pid, syscall.SIGKILL)
		_ = n.patroni.Wait()
		n.patroni = nil
	}
	if _, err := os.Stat(filepath.Join(n.Dir, "postmaster.pid")); err == nil {
		_, err := pc.c.run(ctx, "pg_ctl", "-D", n.Dir, "-m", "immediate", "-w", "stop")
		return err
	}
	return nil
}

// Logs returns every node's Patroni log, for failure messages.
func (pc *PatroniCluster) Logs() string {
	var b strings.Builder
	for _, n := range pc.Nodes {
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(n.Dir), "patroni.log"))
		fmt.Fprintf(&b, "--- %s\n%s\n", n.Name, tail(string(log), 2000))
	}
	return b.String()
}

// Close stops Patroni, PostgreSQL and etcd and removes their files.
func (pc *PatroniCluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range pc.Nodes {
		_ = pc.Kill(ctx, n)
	}
	if pc.etcd != nil && pc.etcd.Process != nil {
		_ = syscall.Kill(-pc.etcd.Process.Pid, syscall.SIGKILL)
		_ = pc.etcd.Wait()
	}
	if pc.root != "" {
		_ = os.RemoveAll(pc.root)
	}
}

// patronictl runs patronictl with the first node's config.
func (pc *PatroniCluster) patronictl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "patronictl", append([]string{"-c", pc.config[0]}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("patronictl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Pause stops Patroni from managing the cluster (patronictl pause): the
// leader keeps its key, and nobody fences what an operator does by hand.
func (pc *PatroniCluster) Pause(ctx context.Context) error {
	return pc.patronictl(ctx, "pause", pc.Scope, "--wait")
}

// Resume hands the cluster back to Patroni (patronictl resume).
func (pc *PatroniCluster) Resume(ctx context.Context) error {
	return pc.patronictl(ctx, "resume", pc.Scope, "--wait")
}

// Reinit has Patroni throw n's data away and copy it again from the
// leader (patronictl reinit), and waits until it is done.
func (pc *PatroniCluster) Reinit(ctx context.Context, n *PatroniNode) error {
	return pc.patronictl(ctx, "reinit", pc.Scope, n.Name, "--force", "--wait")
}

// PromoteBehindPatroni promotes n's PostgreSQL with pg_ctl, as an operator
// would by hand while Patroni is paused: n becomes writable on a new
// timeline without the leader key.
func (pc *PatroniCluster) PromoteBehindPatroni(ctx context.Context, n *PatroniNode) error {
	_, err := pc.c.run(ctx, "pg_ctl", "-D", n.Dir, "-w", "-t", "60", "promote")
	return err
}

// SetTags gives node n the member tags extra besides its dc tag (YAML
// flow-map entries such as `noloadbalance: true`; "" for none) in its
// patroni.yml, and has its Patroni reload it (POST /reload re-reads the
// local configuration); /cluster shows them from Patroni's next loop.
func (pc *PatroniCluster) SetTags(ctx context.Context, n *PatroniNode, extra string) error {
	i := slices.Index(pc.Nodes, n)
	if i < 0 {
		return errors.New("pgtest: not a node of this cluster")
	}
	text, err := os.ReadFile(pc.config[i])
	if err != nil {
		return err
	}
	lines := strings.Split(string(text), "\n")
	for j, l := range lines {
		if strings.HasPrefix(l, "tags: ") {
			lines[j] = "tags: {dc: " + n.Name
			if extra != "" {
				lines[j] += ", " + extra
			}
			lines[j] += "}"
		}
	}
	if err := os.WriteFile(pc.config[i], []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", n.APIURL+"/reload", nil)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("pgtest: POST %s/reload: %s", n.APIURL, resp.Status)
	}
	return nil
}
