package main

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Role is what every connection of a pool must be connected to.
type Role int

const (
	// Primary: a writable server (target_session_attrs=read-write).
	Primary Role = iota
	// Replica: a server in recovery (target_session_attrs=standby).
	Replica
)

// Options describe a pool that finds its hosts through pgdns.
type Options struct {
	DSN      string        // everything but the host: "user=app dbname=app"
	Name     string        // "primary.db.local", "lag-1s.replica.db.local"...
	Role     Role          // what the name's hosts must be
	Resolver *net.Resolver // asks pgdns; nil: the system resolver
	MaxConns int32         // default 4

	// MaxConnLifetime closes every connection this long after it was
	// opened, whatever it is connected to: the bound on how long a pool
	// can stay on a host that still looks right (a cut-off old primary
	// that is still writable). Default 5 minutes.
	MaxConnLifetime time.Duration
	// RoleCheckEvery is how often a connection handed out by the pool is
	// asked pg_is_in_recovery(); one that no longer matches Role is closed
	// and another one opened through Name. Default 1 s, the TTL of
	// pgdns's answers.
	RoleCheckEvery time.Duration
}

// NewPool returns a pgxpool that resolves Name through pgdns for every
// new connection, and drops a connection whose server no longer has the
// pool's role: a replica pool lets go of a promoted replica, a primary
// pool of anything that is not writable. A connection to a server that has
// gone away fails its check and is replaced.
func NewPool(ctx context.Context, o Options) (*pgxpool.Pool, error) {
	attrs := "read-write"
	if o.Role == Replica {
		attrs = "standby"
	}
	cfg, err := pgxpool.ParseConfig(o.DSN + " host=" + o.Name + " target_session_attrs=" + attrs)
	if err != nil {
		return nil, err
	}
	resolver := o.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	cfg.ConnConfig.LookupFunc = shuffled(resolver)
	cfg.MaxConns = 4
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	cfg.MaxConnLifetime = 5 * time.Minute
	if o.MaxConnLifetime > 0 {
		cfg.MaxConnLifetime = o.MaxConnLifetime
	}
	cfg.MaxConnLifetimeJitter = cfg.MaxConnLifetime / 10
	rc := &roleCheck{inRecovery: o.Role == Replica, every: time.Second, checked: map[*pgx.Conn]time.Time{}}
	if o.RoleCheckEvery > 0 {
		rc.every = o.RoleCheckEvery
	}
	cfg.AfterConnect = rc.connected
	cfg.PrepareConn = rc.prepare
	cfg.BeforeClose = rc.forget
	return pgxpool.NewWithConfig(ctx, cfg)
}

// roleCheck remembers when each connection last showed the pool's role.
type roleCheck struct {
	inRecovery bool
	every      time.Duration

	mu      sync.Mutex
	checked map[*pgx.Conn]time.Time
}

// connected marks a new connection as checked: target_session_attrs has
// just verified it.
func (r *roleCheck) connected(_ context.Context, c *pgx.Conn) error {
	r.mark(c)
	return nil
}

func (r *roleCheck) mark(c *pgx.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked[c] = time.Now()
}

// prepare runs before the pool hands c out. Returning false closes c, and
// the pool tries another connection or opens a new one.
func (r *roleCheck) prepare(ctx context.Context, c *pgx.Conn) (bool, error) {
	r.mu.Lock()
	last, ok := r.checked[c]
	r.mu.Unlock()
	if ok && time.Since(last) < r.every {
		return true, nil
	}
	var inRecovery bool
	if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		// The caller gave up, or the server is gone: close it either way.
		return false, ctx.Err()
	}
	if inRecovery != r.inRecovery {
		return false, nil
	}
	r.mark(c)
	return true, nil
}

// forget drops what is known of a connection the pool closes.
func (r *roleCheck) forget(c *pgx.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.checked, c)
}

// shuffled looks host up and puts the addresses in random order. pgx
// connects to the first address that accepts, and Go's resolver sorts
// addresses (RFC 6724), which undoes the rotation pgdns gives replica
// answers: without the shuffle, every connection of a replica pool would
// go to the same replica.
func shuffled(r *net.Resolver) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		addrs, err := r.LookupHost(ctx, host)
		rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
		return addrs, err
	}
}

// NewResolver returns a resolver that asks the DNS server at addr
// ("127.0.0.1:5353") instead of the system's.
func NewResolver(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}
