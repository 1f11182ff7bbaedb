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
)

// maxBody bounds what is read from one /cluster answer.
const maxBody = 1 << 20

// member is the part of a /cluster member pgdns uses.
type member struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Members asks /cluster of each URL in turn and returns the members of the
// first that answers, as sorted "host:port".
func Members(ctx context.Context, client *http.Client, urls []string) ([]string, error) {
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

func members(ctx context.Context, client *http.Client, url string) ([]string, error) {
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
	var hosts []string
	for _, m := range body.Members {
		if m.Host == "" {
			continue // a member that has not published its address yet
		}
		port := m.Port
		if port == 0 {
			port = 5432
		}
		hosts = append(hosts, net.JoinHostPort(m.Host, strconv.Itoa(port)))
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), nil
}
