// Package zone owns pgdns's domain: the hosts of each PostgreSQL cluster and
// what the probe last learned of them, the DNS name grammar, and the rules
// that pick hosts for a name.
//
// It is pure: no I/O, no DNS wire types, no database driver. The probe
// builds a Snapshot aside and publishes it through a Table with one atomic
// store; the DNS server, the HTTP API and the metrics take one View per
// request (the current Snapshot, one moment, one turn) and read it to the
// end. Nothing published is ever mutated, so readers take no lock.
//
// What a name's answer is (Outcome) and why a host is set aside (Aside) are
// types: each adapter maps them to its protocol in one switch.
//
// Two rules every edge shares live here too, as the one package all of
// them import: how a host address is read (ParseHostPort) and how a secret
// is kept out of printed text (Redact).
package zone
