// Package events keeps pgdns's recent events in memory: each change of its
// mind (a host went down or came back, a primary appeared, moved or
// vanished, a split brain began or ended, a timeline was superseded, a
// drain began or ended, a reload was applied or rejected, an identity
// settled), numbered by a growing index, for GET /v1/events, the status
// page and `pgdns events`.
//
// A Log is a ring of the last Capacity events plus the requests waiting
// for a newer one (Consul-style blocking queries). It imports nothing of
// pgdns: the change detector lives in package zone (zone.Changes), the
// wiring in internal/app, and the HTTP endpoint in httpapi.
package events
