package app

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/patroni"
)

// effective is cfg with each cluster's hosts extended by the members
// Patroni reported: configured hosts first, then the others in order. A
// member's dc tag gives its location unless the configuration gives one.
func (a *App) effective(cfg *config.Config) *config.Config {
	out := *cfg
	out.Clusters = make([]config.Cluster, len(cfg.Clusters))
	for i, c := range cfg.Clusters {
		c.Hosts = slices.Clone(c.Hosts)
		c.Locations = maps.Clone(c.Locations)
		for _, m := range a.discovered[c.Name] {
			if !slices.Contains(c.Hosts, m.Addr) {
				c.Hosts = append(c.Hosts, m.Addr)
			}
			if _, set := c.Locations[m.Addr]; !set && m.Location != "" {
				if c.Locations == nil {
					c.Locations = map[string]string{}
				}
				c.Locations[m.Addr] = m.Location
			}
		}
		out.Clusters[i] = c
	}
	return &out
}

// discoveryInterval is how often Patroni's member list is read.
const discoveryInterval = 2 * time.Second

// discoveryLoop keeps the member lists of clusters with Patroni URLs
// current, and re-targets the probe when one changes.
func (a *App) discoveryLoop(ctx context.Context) {
	defer close(a.discoDone)
	tick := time.NewTicker(discoveryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		if ctx.Err() != nil { // Stop cancelled us while we waited for the lock
			a.mu.Unlock()
			return
		}
		if a.discover(ctx) && a.running != nil {
			probing := a.effective(a.cfg)
			if err := a.swap(probing); err != nil {
				a.log.Warn("Patroni members changed but the new list could not be applied", "error", err)
			} else {
				a.log.Info("Patroni members changed; probing the new list")
			}
		}
		a.mu.Unlock()
	}
}

// discover reads every cluster's Patroni member list and reports whether
// any changed. A cluster whose Patroni does not answer keeps its last
// list. The caller holds a.mu (or is Start).
func (a *App) discover(ctx context.Context) bool {
	changed := false
	for _, c := range a.cfg.Clusters {
		if len(c.Patroni) == 0 {
			continue
		}
		members, refused, err := patroni.Members(ctx, httpClient, c.Patroni)
		if why := errors.Join(refused...); why != nil && why.Error() != a.refused[c.Name] {
			a.log.Warn("Patroni lists members that are not host:port; not probing them", "cluster", c.Name, "refused", strings.ReplaceAll(why.Error(), "\n", "; "))
			a.refused[c.Name] = why.Error()
		} else if why == nil {
			delete(a.refused, c.Name)
		}
		if err != nil {
			if !a.discoFailed[c.Name] {
				a.log.Warn("cannot read members from Patroni; keeping the last list", "cluster", c.Name, "error", err)
			}
			a.discoFailed[c.Name] = true
			continue
		}
		a.discoFailed[c.Name] = false
		if !slices.Equal(members, a.discovered[c.Name]) {
			a.log.Info("members from Patroni", "cluster", c.Name, "members", memberList(members))
			a.discovered[c.Name] = members
			changed = true
		}
	}
	return changed
}

// memberList is members for the log: host:port, with @location when the
// member has a dc tag.
func memberList(members []patroni.Member) string {
	var b strings.Builder
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.Addr)
		if m.Location != "" {
			b.WriteString("@" + m.Location)
		}
	}
	return b.String()
}

// httpClient reads Patroni's REST API.
var httpClient = &http.Client{Timeout: 3 * time.Second}
