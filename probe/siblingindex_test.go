package probe

import (
	"slices"
	"testing"
)

// sameIdentity's index (siblings.go) lists exactly the clusters a scan of
// every configured cluster finds of ci's identity, in order, as
// identities are established and replaced: two clusters of one identity
// (siblings) and the rest each of its own.
func TestSameIdentityIndexFollowsIdentities(t *testing.T) {
	f := newBenchFleet(t, 6, 3)
	scan := func(ci int) []int {
		var l []int
		for cj, o := range f.p.state {
			if o.Identity == f.p.state[ci].Identity {
				l = append(l, cj)
			}
		}
		return l
	}
	check := func(when string) {
		t.Helper()
		for ci := range f.p.state {
			if f.p.state[ci].Identity == 0 {
				continue
			}
			if got, want := f.p.sameIdentity(ci), scan(ci); !slices.Equal(got, want) {
				t.Errorf("%s: cluster %d (identity %d): indexed %v, want %v", when, ci, f.p.state[ci].Identity, got, want)
			}
		}
	}
	check("each its own identity")
	if got := f.p.sameIdentity(2); !slices.Equal(got, []int{2}) {
		t.Fatalf("a cluster with no sibling: %v, want only itself", got)
	}
	// As a build writes an identity established anew (build.go).
	f.p.state[4].Identity = f.p.state[1].Identity
	f.p.indexIdentity(4)
	check("cluster 4 takes cluster 1's identity")
	if got := f.p.sameIdentity(1); !slices.Equal(got, []int{1, 4}) {
		t.Fatalf("siblings: %v, want [1 4]", got)
	}
	f.p.state[0].Identity = f.p.state[1].Identity
	f.p.indexIdentity(0)
	check("cluster 0 too")
	if got := f.p.sameIdentity(4); !slices.Equal(got, []int{0, 1, 4}) {
		t.Fatalf("siblings: %v, want [0 1 4] in configuration order", got)
	}
	f.p.state[1].Identity = 77
	f.p.indexIdentity(1)
	check("cluster 1 replaced by another")
	f.p.state[0].Identity = 0
	f.p.indexIdentity(0)
	check("cluster 0 without one")
	if got := f.p.sameIdentity(4); !slices.Equal(got, []int{4}) {
		t.Fatalf("left: %v, want [4]", got)
	}
}

// BenchmarkSharedBranches is sharedBranches of one cluster with no sibling
// in a fleet of the scale bench's 10,000 hosts (3,334 clusters): every
// build calls it.
func BenchmarkSharedBranches(b *testing.B) {
	f := newBenchFleet(b, 3334, 3)
	b.ResetTimer()
	for i := range b.N {
		if f.p.sharedBranches(i%3334) == nil {
			b.Fatal("no branches")
		}
	}
}
