// Package deploy holds no code: its tests check the deployment files next
// to it (kubernetes/, systemd/) offline, so that they cannot rot. The
// Kubernetes API modules they decode into are imported by the tests only
// and never reach the pgdns binary.
package deploy
