// Package deploy holds no code: its tests check the deployment files next
// to it (kubernetes/, systemd/, prometheus/, grafana/) offline, so that
// they cannot rot. The Kubernetes, Prometheus Operator and PromQL modules
// they decode and parse with are imported by the tests (and deploy/grafana,
// which only tests import) and never reach the pgdns binary.
package deploy
