package app

import (
	"fmt"
	"time"

	"github.com/pgdns/pgdns/probe"
)

const (
	// progressEvery is how often waitProbed looks at the new prober's count.
	progressEvery = 50 * time.Millisecond
	// reloadStall, beyond 2×probe.timeout, is how long a reload waits for
	// one more host's first result before it is rejected. Every first
	// probe ends within probe.timeout, so only a prober that is stuck, or
	// a machine starved of CPU, gets there: it is generous, because a
	// rejected reload leaves the operator unable to change the hosts.
	reloadStall = 30 * time.Second
)

// waitProbed waits until p has probed every host once, for as long as its
// count of probed hosts keeps rising: it gives up only when no host got
// its first result for stall. A fixed deadline rejected every reload of a
// big fleet: a prober opens at most 64 first probes at once, each slot
// held until its probe ends or 25 ms (probe/intake.go), so 10,000 hosts
// whose first probe hangs (a partitioned data centre) take 4 s at the
// least, and a healthy fleet of that size more on a busy machine, while
// the deadline was 2×probe.timeout+2 s however many hosts there were
// (review 8, R8-3). The running prober keeps answering meanwhile.
func waitProbed(p *probe.Prober, stall time.Duration) error {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	began := time.Now()
	last, lastAt := -1, began
	for {
		select {
		case <-p.Ready():
			return nil
		case now := <-tick.C:
			probed, hosts := p.Progress()
			if probed > last {
				last, lastAt = probed, now
				continue
			}
			if now.Sub(lastAt) >= stall {
				return fmt.Errorf("the new hosts were not all probed in time (%d of %d after %v, none more in the last %v); keeping the running configuration",
					probed, hosts, now.Sub(began).Round(time.Millisecond), stall)
			}
		}
	}
}
