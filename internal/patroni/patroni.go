// Package patroni reads a cluster's member list from Patroni's REST API, so
// that a node added to or removed from Patroni is probed, or no longer
// probed, without a config change. Only the list is taken from Patroni:
// pgdns's own probe decides every host's role and lag.
package patroni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// maxBody bounds what is read from one /cluster answer.
const maxBody = 1 << 20

// member is the part of a /cluster member pgdns uses.
type member struct {
	Name string         `json:"name"`
	Host string         `json:"host"`
	Port any            `json:"port"` // a number; anything else refuses the member, not the list
	Tags map[string]any `json:"tags"` // Patroni's member tags, as in its config; absent when none
	Role string         `json:"role"` // leader or standby_leader: the member holding the leader key
}

// LocationTag is the Patroni member tag that gives a member's location
// (tags: {dc: east} in the member's patroni.yml). Patroni shows a
// member's tags in /cluster.
const LocationTag = "dc"

// NoLoadBalanceTag is the Patroni member tag that takes a member out of
// read load balancing: Patroni's own /replica check fails on it, and
// pgdns drains the member (zone.DrainByTag).
const NoLoadBalanceTag = "noloadbalance"

// Member is one member Patroni reports.
type Member struct {
	Addr     string // "host:port"
	Name     string // the member's name, as Patroni reports it (its patroni.yml name); may be "" or any text
	Location string // the dc tag, lower-cased; "" when absent, not a string, or not a valid location name
	// NoLoadBalance: the member is tagged noloadbalance with a value
	// Patroni takes as true (noLoadBalance); TagNote says so when the
	// value is not a JSON boolean.
	NoLoadBalance bool
	TagNote       string
	// Leader says the member holds Patroni's leader key: /cluster gives it
	// role "leader" ("standby_leader" in a standby cluster), whatever its
	// PostgreSQL does. No other member may be the primary.
	Leader bool
}

// Leader returns the address of the member of members holding the leader
// key, "" when none does.
func Leader(members []Member) string {
	for _, m := range members {
		if m.Leader {
			return m.Addr
		}
	}
	return ""
}

// Members asks /cluster of each URL in turn and returns the members of the
// first that answers, sorted by address, and why each member it refused
// was refused: a member whose host is not an IP address or a DNS name, or
// whose port is not one (zone.ParseHostPort), is never probed.
func Members(ctx context.Context, client *http.Client, urls []string) ([]Member, []error, error) {
	var errs []error
	for _, u := range urls {
		hosts, refused, err := members(ctx, client, strings.TrimSuffix(u, "/")+"/cluster")
		if err == nil {
			return hosts, refused, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return nil, nil, errors.Join(errs...)
}

func members(ctx context.Context, client *http.Client, url string) ([]Member, []error, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("status %s", resp.Status)
	}
	var body struct {
		Members []member `json:"members"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body); err != nil {
		return nil, nil, fmt.Errorf("cannot read /cluster: %w", err)
	}
	var hosts []Member
	var refused []error
	for _, m := range body.Members {
		if m.Host == "" {
			continue // a member that has not published its address yet
		}
		addr, err := memberAddr(m)
		if err != nil {
			refused = append(refused, fmt.Errorf("member %q: %w", m.Name, err))
			continue
		}
		loc, _ := m.Tags[LocationTag].(string)
		if loc = strings.ToLower(loc); !zone.ValidLocationName(loc) {
			loc = "" // not a name a dc- label can carry: no location
		}
		nlb, note := noLoadBalance(m.Tags)
		hosts = append(hosts, Member{Addr: addr, Name: m.Name, Location: loc, NoLoadBalance: nlb, TagNote: note,
			Leader: m.Role == "leader" || m.Role == "standby_leader"})
	}
	slices.SortFunc(hosts, func(a, b Member) int { return strings.Compare(a.Addr, b.Addr) })
	return slices.CompactFunc(hosts, func(a, b Member) bool { return a.Addr == b.Addr }), refused, nil
}

// noLoadBalance reads a member's noloadbalance tag as Patroni does
// (bool(tags.get('noloadbalance', False)) in its Python: a JSON true, a
// non-empty string, a non-zero number, a non-empty list or object), so
// that pgdns drains exactly the members Patroni's /replica leaves out. A
// value that is not a boolean (its config schema wants one; YAML's
// noloadbalance: "false" is the string) is said in note, with what it
// counts as.
func noLoadBalance(tags map[string]any) (on bool, note string) {
	v, ok := tags[NoLoadBalanceTag]
	if !ok || v == nil {
		return false, ""
	}
	var kind string
	switch x := v.(type) {
	case bool:
		return x, ""
	case string:
		on, kind = x != "", "a string"
	case float64:
		on, kind = x != 0, "a number"
	case []any:
		on, kind = len(x) > 0, "a list"
	case map[string]any:
		on, kind = len(x) > 0, "an object"
	default:
		on, kind = true, fmt.Sprintf("a %T", v)
	}
	text, _ := json.Marshal(v)
	if len(text) > 64 {
		text = append(text[:61], "..."...)
	}
	counted := "not drained"
	if on {
		counted = "drained"
	}
	return on, "Patroni tag " + NoLoadBalanceTag + " is " + string(text) + ", " + kind + " where Patroni wants a boolean: " +
		counted + ", as Patroni's /replica takes it"
}

// memberAddr is m's host:port, checked as a configured host is
// (zone.CheckHost); Patroni leaves the port out for 5432.
func memberAddr(m member) (string, error) {
	port := 5432.0
	switch p := m.Port.(type) {
	case nil:
	case float64:
		port = p
	default:
		return "", fmt.Errorf("port %q is not a number", fmt.Sprint(p))
	}
	if port != float64(int(port)) || port < 1 || port > 65535 {
		return "", fmt.Errorf("port %v is not from 1 to 65535", port)
	}
	if err := zone.CheckHost(m.Host); err != nil {
		return "", fmt.Errorf("host %q: %w", m.Host, err)
	}
	return zone.JoinHostPort(m.Host, uint16(port)), nil
}
