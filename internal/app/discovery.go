package app

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/patroni"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
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
		c.Names = maps.Clone(c.Names)
		for _, m := range a.discovered[c.Name] {
			if !slices.Contains(c.Hosts, m.Addr) {
				c.Hosts = append(c.Hosts, m.Addr)
			}
			if label := a.memberLabel(cfg.DNS.Zone, c.Name, m); label != "" {
				if c.Names == nil {
					c.Names = map[string]string{}
				}
				c.Names[m.Addr] = label // the member's name comes first (docs/names.md)
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

// discoveryMinGap is the least time between two reads of the member lists
// when the probe asks for one (kickDiscovery): it asks on every publish
// while a writable host is not the leader it knows. Kicked reads that move
// no leader key double the gap, up to discoveryInterval.
const discoveryMinGap = 100 * time.Millisecond

// kickDiscovery asks the discovery loop to read the member lists now: the
// probe sees a writable host that is not the member holding the leader key
// as last read (Patroni takes the key before it promotes a member, so the
// list read now likely names it). It never blocks.
func (a *App) kickDiscovery(string) {
	select {
	case a.discoKick <- struct{}{}:
	default:
	}
}

// discoveryLoop keeps the member lists of clusters with Patroni URLs
// current, and re-targets the probe when one changes.
func (a *App) discoveryLoop(ctx context.Context) {
	defer close(a.discoDone)
	tick := time.NewTicker(discoveryInterval)
	defer tick.Stop()
	var last time.Time
	gap := discoveryMinGap // between kicked reads: doubles while they move no leader key
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-a.discoKick:
			if time.Since(last) < gap {
				continue // the probe asks again at its next publish while it is unsure
			}
			kicked = true
		}
		last = time.Now()
		a.mu.Lock()
		if ctx.Err() != nil { // Stop cancelled us while we waited for the lock
			a.mu.Unlock()
			return
		}
		before := a.leaders()
		changed := a.discover(ctx)
		switch {
		case !maps.Equal(before, a.leaders()):
			gap = discoveryMinGap
		case kicked:
			// A writable member without the key that stays so (a rogue
			// promotion in a paused cluster) must not have Patroni read
			// ten times a second for as long as it lasts.
			gap = min(2*gap, discoveryInterval)
		}
		if changed && a.running != nil {
			probing := a.effective(a.cfg)
			a.warnConfig(probing)
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
		} else if why == nil && err == nil {
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
		sameMember := func(x, y patroni.Member) bool {
			return x.Addr == y.Addr && x.Location == y.Location && x.Name == y.Name
		}
		membersChanged := !slices.EqualFunc(members, a.discovered[c.Name], sameMember)
		was := patroni.Leader(a.discovered[c.Name])
		tagsWere := memberTags(a.discovered[c.Name])
		a.discovered[c.Name] = members
		if membersChanged {
			a.log.Info("members from Patroni", "cluster", c.Name, "members", memberList(members))
			a.noteLabels(c, members)
			changed = true
		}
		// Tags change without a new member list too (a noloadbalance
		// tag set and Patroni reloaded): the running prober hears of
		// them directly, a new one from its config.
		if tags := memberTags(members); !maps.Equal(tags, tagsWere) {
			a.log.Info("Patroni member tags", "cluster", c.Name, "noloadbalance", tagList(tags))
			if a.running != nil {
				a.running.p.SetTags(c.Name, tags)
			}
		}
		// The leader key moves without a new member list: the running
		// prober hears of it directly, a new one from its config.
		if leader := patroni.Leader(members); leader != was {
			a.log.Info("Patroni leader key", "cluster", c.Name, "leader", cmp.Or(leader, "none"), "was", cmp.Or(was, "none"))
			if a.running != nil {
				a.running.p.SetLeader(c.Name, leader)
			}
		}
	}
	return changed
}

// leaders returns the member holding the leader key of each cluster read
// from Patroni, as last read. The caller holds a.mu.
func (a *App) leaders() map[string]string {
	out := make(map[string]string, len(a.discovered))
	for name, members := range a.discovered {
		out[name] = patroni.Leader(members)
	}
	return out
}

// memberTags is what the members' Patroni tags say for the answers, by
// address; members with nothing to say are left out.
func memberTags(members []patroni.Member) map[string]probe.MemberTags {
	out := map[string]probe.MemberTags{}
	for _, m := range members {
		if m.NoLoadBalance || m.TagNote != "" {
			out[m.Addr] = probe.MemberTags{NoLoadBalance: m.NoLoadBalance, Note: m.TagNote}
		}
	}
	return out
}

// tagList is the members tagged noloadbalance, for the log.
func tagList(tags map[string]probe.MemberTags) string {
	var out []string
	for addr, t := range tags {
		if t.NoLoadBalance {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return cmp.Or(strings.Join(out, ","), "none")
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

// memberLabel is the host label Patroni member m of cluster asks for: its
// name, sanitised to a valid label (zone.SanitizeLabel: "pg_node.1" →
// "pg-node-1"); "" when nothing of it is left, or when another member
// name seen since start sanitises to the same label (noteLabels), and the
// host is labelled by its address. Were the label given to one of two
// such members, it would move between machines as members come and go
// (review R13: node_1 and NODE-1); withheld from both, neither host name
// ever answers another machine. A name that is no label is never a
// reason to refuse the member. zoneName is the zone of the configuration
// being built (a reload may change it). The caller holds a.mu.
func (a *App) memberLabel(zoneName, cluster string, m patroni.Member) string {
	label := zone.SanitizeLabel(m.Name)
	if len(a.labelNames[cluster][label]) > 1 {
		return ""
	}
	// Cut and hashed when the host name would be longer than DNS allows
	// (review S9); "" (the derived label, for which config left room)
	// when not even that fits.
	return zone.FitHostLabel(label, cluster, zoneName)
}

// noteLabels records the member names of c's members by sanitised label,
// warns once when two member names meet on one label (naming both
// members and addresses), and warns of each member whose host name is not
// its own name, with the host name it actually has (zone.AssignLabels
// over the hosts pgdns probes). The caller holds a.mu, after
// a.discovered[c.Name] = members.
func (a *App) noteLabels(c config.Cluster, members []patroni.Member) {
	if a.labelNames == nil {
		a.labelNames = map[string]map[string]map[string]string{}
	}
	seen := a.labelNames[c.Name]
	if seen == nil {
		seen = map[string]map[string]string{}
		a.labelNames[c.Name] = seen
	}
	for _, m := range members {
		label := zone.SanitizeLabel(m.Name)
		if label == "" {
			continue
		}
		names := seen[label]
		if names == nil {
			names = map[string]string{}
			seen[label] = names
		}
		_, known := names[m.Name]
		names[m.Name] = m.Addr // a member that moved: its label moves with it
		if known {
			continue
		}
		if len(names) > 1 {
			var who []string
			for _, name := range slices.Sorted(maps.Keys(names)) {
				who = append(who, name+"@"+names[name])
			}
			a.log.Warn("Patroni member names sanitise to one host label; no member's host uses it while pgdns runs, each is named by its address",
				"cluster", c.Name, "label", label, "members", strings.Join(who, ","))
		}
	}
	eff := a.effective(&config.Config{DNS: a.cfg.DNS, Clusters: []config.Cluster{c}}).Clusters[0]
	labels, _ := zone.AssignLabels(eff.Hosts, eff.Names)
	for _, m := range members {
		i := slices.Index(eff.Hosts, m.Addr)
		if i < 0 || labels[i] == m.Name {
			continue
		}
		msg := "Patroni member name is not a valid host label; its host name uses another"
		switch {
		case zone.ValidHostLabel(m.Name) && zone.FitHostLabel(m.Name, c.Name, a.cfg.DNS.Zone) != m.Name:
			msg = "Patroni member name gives a host name longer than DNS allows (255 octets); its host name uses a shorter label"
		case zone.ValidHostLabel(m.Name):
			msg = "Patroni member name is another host's label; its host name uses another"
		}
		a.log.Warn(msg, "cluster", c.Name, "member", m.Name, "addr", m.Addr, "label", labels[i], "host_name", zone.HostName(labels[i], c.Name))
	}
}
