package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Client connects through pgdns names. Copy it: it is the whole
// integration, about fifty lines.
type Client struct {
	DSN      string        // everything but the host: "user=app dbname=app"
	Zone     string        // "db.local"
	Resolver *net.Resolver // asks pgdns; see NewResolver
}

// NewResolver returns a resolver that asks the DNS server at addr
// ("127.0.0.1:5353"). A program whose system resolver already forwards the
// zone to pgdns (CoreDNS, a stub domain) can use net.DefaultResolver.
func NewResolver(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// connect opens a session to the first of hosts that resolves and accepts
// it. A name that resolves to nothing (no replica fits) is skipped, as
// libpq does with a multi-host string.
func (c *Client) connect(ctx context.Context, attrs string, hosts ...string) (*pgx.Conn, error) {
	for i, h := range hosts {
		hosts[i] = h + "." + c.Zone
	}
	cfg, err := pgx.ParseConfig(c.DSN + " host=" + strings.Join(hosts, ",") + " target_session_attrs=" + attrs)
	if err != nil {
		return nil, err
	}
	cfg.LookupFunc = c.Resolver.LookupHost
	return pgx.ConnectConfig(ctx, cfg)
}

// Primary opens a read-write session on the current primary. Keep such
// sessions short, or give a pool a max lifetime: an open connection does
// not move when the primary does.
func (c *Client) Primary(ctx context.Context) (*pgx.Conn, error) {
	return c.connect(ctx, "read-write", "primary")
}

// Fresh opens a session on a replica at most maxLag behind, or on the
// primary when none is that fresh.
func (c *Client) Fresh(ctx context.Context, maxLag time.Duration) (*pgx.Conn, error) {
	return c.connect(ctx, "any", fmt.Sprintf("lag-%dms.replica", maxLag.Milliseconds()), "primary")
}

// Token is where a write ended in the WAL: carry it to the next read (in a
// cookie or header; sign it if clients could forge it).
type Token string

// WriteToken returns the token of everything conn has committed so far,
// with the timeline it was written on (lsn-HI-LO-tN), so that no host that
// lost the write in a failover can answer it. Call it after the commit.
func WriteToken(ctx context.Context, conn *pgx.Conn) (Token, error) {
	var lsn string
	var tli int64
	err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text,
	  ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int`).Scan(&lsn, &tli)
	if err != nil {
		return "", err
	}
	hi, lo, ok := strings.Cut(lsn, "/")
	if !ok {
		return "", errors.New("unexpected LSN " + lsn)
	}
	return Token(strings.ToLower(fmt.Sprintf("lsn-%s-%s-t%d", hi, lo, tli))), nil
}

// ReadYourWrites opens a session on a replica that has replayed token, or
// on the primary when none has yet and the primary has (or may have) the
// write: prefer-replica makes that choice in pgdns. It fails when no host
// provably has the write (lost in a failover, a forked timeline, a restart
// of the timeline's writer). Never add "primary" after the token's name:
// the client would then skip pgdns's refusal and read without its write.
func (c *Client) ReadYourWrites(ctx context.Context, token Token) (*pgx.Conn, error) {
	return c.connect(ctx, "any", string(token)+".prefer-replica")
}
