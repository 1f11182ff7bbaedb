package test

// Review 7, H11 (on 8f61224, forget-fork): the proof was dropped at the
// replica's next server run, whatever that run was. An operator who asked
// before the rebuild and whose replica then merely restarted (a crash, a
// setting that needs a restart, a reboot, the operator's own stop before
// deciding) had the unrebuilt replica, still the other branch's, answered
// again. Forget-fork now refuses while the host runs the run proven.

import (
	"strings"
	"testing"
	"time"
)

func TestForgetForkThenARestartThatIsNoRebuild(t *testing.T) {
	t.Parallel()
	e := forkedWithAdminToken(t, "r7-admin-token")
	n2 := e.pg.Nodes[1]

	// The operator means to rebuild n2 and says so first: refused, n2
	// still runs the run proven on another branch.
	code, body := e.post(t, "/v1/admin/forget-fork?cluster=main&host="+n2.Addr(), "r7-admin-token")
	// n2 restarts before the rebuild: same data directory, the other branch.
	restartUnrebuilt(t, n2)
	e.holds(t, "replica.db.local.", 3*time.Second, without(n2.IP),
		"n2, restarted but not rebuilt: its data is still the other branch's (it has the write the primary lost)")
	if code != 409 || !strings.Contains(body, "is the one proven on another branch") {
		t.Errorf("forget-fork before the rebuild: %d %s, want 409 saying n2 still runs the run proven", code, body)
	}
}
