package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"
)

func pgxConnect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.Connect(ctx, dsn)
}

// ryowResult is the read-your-writes step's figures.
type ryowResult struct {
	stamp                stamp
	rounds               int
	byReplicaWait        int
	byReplicaNoWait      int
	waitP50, waitP99     time.Duration
	noWaitP50, noWaitP99 time.Duration
}

// readYourWrites: insert, take the LSN, look up lsn-….prefer-replica at
// once, 300 times, against pgdns with lsn_wait 20ms and a second pgdns on
// the same cluster with lsn_wait 0.
func (b *bench) readYourWrites(ctx context.Context, r *report) error {
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	conf := fmt.Sprintf("dns: {listen: %q, lsn_wait: 0s}\nhttp: {listen: \"\"}\nprobe: {interval: 250ms, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
		b.addr.noWaitDNS, strings.Join(hosts, ", "))
	path := b.dir + "/pgdns-nowait.yaml"
	if err := writeFile(path, conf); err != nil {
		return err
	}
	cmd, err := b.start(b.pgdns, []string{"-config", path})
	if err != nil {
		return err
	}
	defer b.stopProc(cmd)
	if err := waitDNS(b.addr.noWaitDNS, "replica.db.local.", 2, 15*time.Second); err != nil {
		return err
	}
	conn, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	res := &ryowResult{stamp: b.stampNow(), rounds: 300}
	var wait, noWait []time.Duration
	client := &dns.Client{Timeout: time.Second}
	for i := range res.rounds {
		var lsn string
		if _, err := conn.Exec(ctx, "INSERT INTO bench (v) VALUES ('x')"); err != nil {
			return err
		}
		if err := conn.QueryRow(ctx, "SELECT lower(replace(pg_current_wal_insert_lsn()::text, '/', '-'))").Scan(&lsn); err != nil {
			return err
		}
		name := "lsn-" + lsn + ".prefer-replica.db.local."
		servers := []string{b.addr.pgdnsDNS, b.addr.noWaitDNS}
		if i%2 == 1 {
			servers = []string{b.addr.noWaitDNS, b.addr.pgdnsDNS}
		}
		for _, s := range servers {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			start := time.Now()
			m, _, err := client.Exchange(req, s)
			took := time.Since(start)
			if err != nil {
				return err
			}
			byReplica := len(m.Answer) > 0 && m.Answer[0].(*dns.A).A.String() != b.addr.primaryIP
			if s == b.addr.pgdnsDNS {
				wait = append(wait, took)
				if byReplica {
					res.byReplicaWait++
				}
			} else {
				noWait = append(noWait, took)
				if byReplica {
					res.byReplicaNoWait++
				}
			}
		}
	}
	slices.Sort(wait)
	slices.Sort(noWait)
	res.waitP50, res.waitP99 = wait[len(wait)/2], wait[len(wait)*99/100]
	res.noWaitP50, res.noWaitP99 = noWait[len(noWait)/2], noWait[len(noWait)*99/100]
	r.ryow = res
	return nil
}
