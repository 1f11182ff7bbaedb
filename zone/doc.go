// Package zone owns pgdns's domain: the hosts of each PostgreSQL cluster and
// what the probe last learned of them, the DNS name grammar, and the rules
// that pick hosts for a name.
//
// It is pure: no I/O, no DNS wire types, no database driver. The probe
// builds a Snapshot aside and publishes it through a Table with one atomic
// store; the DNS server and the HTTP API load the current Snapshot once per
// request and read it to the end. Nothing published is ever mutated, so
// readers take no lock.
package zone
