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
	"net"
	"net/http"
	"slices"
	"strconv"
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
	Port int            `json:"port"`
	Tags map[string]any `json:"tags"` // Patroni's member tags, as in its config; absent when none
}

// LocationTag is the Patroni member tag that gives a member's location
// (tags: {dc: east} in the member's patroni.yml). Patroni shows a
// member's tags in /cluster.
const LocationTag = "dc"

// Member is one member Patroni reports.
type Member struct {
	Addr     string // "host:port"
	Location string // the dc tag, lower-cased; "" when absent, not a string, or not a valid location name
}

// Members asks /cluster of each URL in turn and returns the members of the
// first that answers, sorted by address.
func Members(ctx context.Context, client *http.Client, urls []string) ([]Member, error) {
	var errs []error
	for _, u := range urls {
		hosts, err := members(ctx, client, strings.TrimSuffix(u, "/")+"/cluster")
		if err == nil {
			return hosts, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return nil, errors.Join(errs...)
}

func members(ctx context.Context, client *http.Client, url string) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var body struct {
		Members []member `json:"members"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body); err != nil {
		return nil, fmt.Errorf("cannot read /cluster: %w", err)
	}
	var hosts []Member
	for _, m := range body.Members {
		if m.Host == "" {
			continue // a member that has not published its address yet
		}
		port := m.Port
		if port == 0 {
			port = 5432
		}
		loc, _ := m.Tags[LocationTag].(string)
		if loc = strings.ToLower(loc); !zone.ValidLocationName(loc) {
			loc = "" // not a name a dc- label can carry: no location
		}
		hosts = append(hosts, Member{Addr: net.JoinHostPort(m.Host, strconv.Itoa(port)), Location: loc})
	}
	slices.SortFunc(hosts, func(a, b Member) int { return strings.Compare(a.Addr, b.Addr) })
	return slices.CompactFunc(hosts, func(a, b Member) bool { return a.Addr == b.Addr }), nil
}
