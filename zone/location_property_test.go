package zone

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestSelectLocalityKeepsAnswerSet: for random clusters, every target,
// with and without a dc- filter, every client location and turn, the
// answer holds the same hosts as for an unlocated client (only the order
// may differ), none twice, local hosts first, and under dc- only hosts of
// that location (but prefer-replica's fallback primary).
func TestSelectLocalityKeepsAnswerSet(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	locs := []string{"", "east", "west"}
	for iter := 0; iter < 400; iter++ {
		n := rng.Intn(7)
		var hosts []Host
		pidx := -1
		if rng.Intn(4) > 0 {
			pidx = 0
		}
		for i := 0; i < n; i++ {
			h := placed(seen(fmt.Sprintf("10.0.0.%d", i+1), i != pidx, 9), locs[rng.Intn(3)])
			hosts = append(hosts, h)
		}
		rng.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
		s := cluster(hosts...)
		for _, name := range []string{"replica", "any", "prefer-replica", "primary", "dc-east.replica", "dc-west.any", "dc-east.prefer-replica", "dc-west.primary"} {
			target := name
			base, err := selectFrom(t, s, target+"."+origin, "", 0)
			if errors.Is(err, ErrUnknownLocation) {
				continue // no host in that location this time
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, from := range []string{"east", "west", "north"} {
				for turn := uint64(0); turn < 5; turn++ {
					got, err := selectFrom(t, s, target+"."+origin, from, turn)
					if err != nil {
						t.Fatal(err)
					}
					a, b := slices.Clone(base), slices.Clone(got)
					slices.Sort(a)
					slices.Sort(b)
					if !slices.Equal(a, b) || len(slices.Compact(b)) != len(got) {
						t.Fatalf("%s from %s turn %d: %v, unlocated %v (hosts %+v)", target, from, turn, got, base, hosts)
					}
					// local first
					byIP := map[string]*Host{}
					for i := range s.Clusters[0].Hosts {
						byIP[s.Clusters[0].Hosts[i].IP.String()] = &s.Clusters[0].Hosts[i]
					}
					if dc, _, ok := strings.Cut(name, "."); ok && strings.HasPrefix(dc, DCPrefix) {
						for _, ip := range got {
							fallback := strings.HasSuffix(name, "prefer-replica") && len(got) == 1 && byIP[ip].Role == RolePrimary
							if byIP[ip].Location != dc[len(DCPrefix):] && !fallback {
								t.Fatalf("%s from %s: %s is in %q", name, from, ip, byIP[ip].Location)
							}
						}
					}
					seenRemote := false
					for _, ip := range got {
						if byIP[ip].Location == from {
							if seenRemote {
								t.Fatalf("%s from %s turn %d: local after remote: %v", target, from, turn, got)
							}
						} else {
							seenRemote = true
						}
					}
				}
			}
		}
	}
}
