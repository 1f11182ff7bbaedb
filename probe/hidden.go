package probe

import "github.com/pgdns/pgdns/zone"

// logHidden logs each host whose replication statistics became hidden
// from the probe role (zone.Host.StatsHidden), or readable again, since
// the last snapshot: once per change, never on every probe.
func (p *Prober) logHidden(snap *zone.Snapshot) {
	for ci, c := range snap.Clusters {
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			was := p.last != nil && p.last.Clusters[ci].Hosts[hi].StatsHidden
			switch {
			case !h.Seen || h.StatsHidden == was:
			case h.StatsHidden:
				p.log.Warn("the probe role cannot read the replication statistics of this host (pg_stat_replication, "+
					"pg_stat_wal_receiver): grant it pg_monitor; meanwhile the decisions that need them fail closed",
					"cluster", c.Name, "host", h.Addr)
			default:
				p.log.Info("the probe role can read the replication statistics of this host again", "cluster", c.Name, "host", h.Addr)
			}
		}
	}
}
