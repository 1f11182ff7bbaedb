// Package httpapi serves pgdns's HTTP JSON API beside DNS: the live host
// table (/v1/hosts), what a name resolves to and why (/v1/resolve), health
// and readiness, Prometheus metrics, and the endpoints of pg-status so that
// a pg-status user can switch by changing one URL.
//
// It reads the same zone snapshots and calls the same selection code as
// the DNS server: the rules exist once, in package zone.
package httpapi
