package probe

import "github.com/pgdns/pgdns/zone"

// serialBase is the snapshot the next one's SOA serials follow: this
// prober's last one, or, before it has built any, the one being served
// (a prober started by a reload or a membership change carries the
// serials on instead of starting over from the clock).
func (p *Prober) serialBase() *zone.Snapshot {
	if p.last != nil {
		return p.last
	}
	return p.table.Load()
}
