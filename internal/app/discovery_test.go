package app

import (
	"maps"
	"slices"
	"testing"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/patroni"
)

// TestEffectiveLocations: Patroni's members join the configured hosts,
// their dc tag gives their location, and a location in the configuration
// wins over the tag; the configuration itself is left as it was.
func TestEffectiveLocations(t *testing.T) {
	a := &App{discovered: map[string][]patroni.Member{"main": {
		{Addr: "10.0.0.1:5432", Location: "west"}, // configured in east: the config wins
		{Addr: "10.0.0.2:5432", Location: "west"},
		{Addr: "10.0.0.3:5432"}, // no tag, no location
	}}}
	configured := map[string]string{"10.0.0.1:5432": "east"}
	cfg := &config.Config{Clusters: []config.Cluster{{Name: "main", Hosts: []string{"10.0.0.1:5432"},
		Patroni: []string{"http://10.0.0.1:8008"}, Locations: maps.Clone(configured)}}}
	got := a.effective(cfg).Clusters[0]
	if want := []string{"10.0.0.1:5432", "10.0.0.2:5432", "10.0.0.3:5432"}; !slices.Equal(got.Hosts, want) {
		t.Fatalf("hosts %v, want %v", got.Hosts, want)
	}
	if want := map[string]string{"10.0.0.1:5432": "east", "10.0.0.2:5432": "west"}; !maps.Equal(got.Locations, want) {
		t.Fatalf("locations %v, want %v", got.Locations, want)
	}
	if !maps.Equal(cfg.Clusters[0].Locations, configured) || len(cfg.Clusters[0].Hosts) != 1 {
		t.Fatalf("effective changed the configuration: %+v", cfg.Clusters[0])
	}
}
