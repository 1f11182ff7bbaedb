package config

import "strings"

// nearestKey is the declared key an unknown key k most likely meant (a
// typo: "probe.intervall", or the right name in the wrong section:
// "dns.interval"), or "" when none is close. A cluster's key is matched
// among the keys of that cluster.
func nearestKey(k string) string {
	var candidates []string
	if rest, ok := strings.CutPrefix(k, "clusters."); ok {
		name, _, _ := strings.Cut(rest, ".")
		for _, d := range clusterKeys {
			candidates = append(candidates, "clusters."+name+"."+d.name)
		}
	} else {
		for _, d := range topKeys {
			candidates = append(candidates, d.name)
		}
		// A mistyped section of a cluster's key (cluster.main.hosts):
		// its second part is then the cluster's name.
		if parts := strings.SplitN(k, ".", 3); len(parts) == 3 && editDistance(parts[0], "clusters") <= 2 {
			for _, d := range clusterKeys {
				candidates = append(candidates, "clusters."+parts[1]+"."+d.name)
			}
		}
	}
	best, bestDist := "", -1
	for _, c := range candidates {
		dist := editDistance(k, c)
		if dist*4 > len(c) && dist > 2 && lastPart(c) != lastPart(k) {
			continue // too far to be a typo, and not the same name elsewhere
		}
		if bestDist < 0 || dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best
}

func lastPart(k string) string { return k[strings.LastIndex(k, ".")+1:] }

// editDistance is the Levenshtein distance of a and b, in bytes (keys are
// ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
