package config

import "github.com/pgdns/pgdns/zone"

// hostNameLengths refuses a host whose name, <label>.host.<cluster>.<zone>,
// is longer than DNS allows (zone.MaxNameOctets): every SRV answer naming
// it would be a malformed message (review S9). For a cluster with Patroni
// the members' labels are not known yet: the cluster and zone must leave
// room for the longest label an address gives (zone.MaxDerivedLabel), the
// label a member gets when its name cannot be used; a longer member name
// is shortened at run time (zone.FitHostLabel), with a WARN line.
func (r *reader) hostNameLengths(cfg *Config) {
	for _, c := range cfg.Clusters {
		labels, _ := zone.AssignLabels(c.Hosts, c.Names)
		for i, label := range labels {
			n := zone.HostNameOctets(label, c.Name, cfg.DNS.Zone)
			if n <= zone.MaxNameOctets {
				continue
			}
			key := "clusters." + c.Name + ".hosts"
			if c.Names[c.Hosts[i]] == label {
				key = "clusters." + c.Name + "." + namesField + "." + label
			}
			r.fail(key, "gives host %q the host name %s.%s, which is %v octets; DNS allows %v: give it a shorter label in clusters.%s.%s, or shorten the cluster's name or dns.zone",
				c.Hosts[i], zone.HostName(label, c.Name), cfg.DNS.Zone, n, zone.MaxNameOctets, c.Name, namesField)
		}
		if len(c.Patroni) > 0 {
			if room := zone.LabelRoom(c.Name, cfg.DNS.Zone); room < zone.MaxDerivedLabel {
				r.fail("clusters."+c.Name+".patroni", "needs room for host labels of %v octets in <label>.host.%s.%s, which leaves %v (DNS allows %v octets in a name): shorten the cluster's name or dns.zone",
					zone.MaxDerivedLabel, c.Name, cfg.DNS.Zone, room, zone.MaxNameOctets)
			}
		}
	}
}
