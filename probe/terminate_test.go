package probe

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// A DBA (or a job that kills idle sessions) ending pgdns's watched
// connection with pg_terminate_backend proves nothing about the server:
// it keeps serving, so Watch must not report it gone (57P01 is also what
// a fast shutdown sends, so the error alone cannot tell the two apart).
func TestWatchSurvivesATerminatedSession(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 20*time.Second)
	done := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	exited := make(chan struct{})
	defer func() { stop(); <-exited }() // before c.Close: the checker is Watch's until then
	go func() {
		defer close(exited)
		done <- c.(Watcher).Watch(wctx)
	}()
	sessions := func() (n int) {
		node.Query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns'", &n)
		return n
	}
	terminate := func() {
		var n int
		node.Query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns'", &n)
		if n != 1 {
			t.Fatalf("terminated %d pgdns sessions, want 1", n)
		}
	}
	stillWatching := func(what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("Watch returned %v %s, while the server serves", err, what)
		case <-time.After(time.Second):
		}
	}
	terminate()
	stillWatching("after its session was terminated")
	// It watches a new session, and sees a fast shutdown (57P01 to every
	// session, then 57P03 to a new one) as the server going away.
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, "Watch's new session", func() (int, bool) {
		n := sessions()
		return n, n == 1
	})
	if err := node.Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	wantNotServing(t, done, 10*time.Second, "Watch returned %v after a fast shutdown, want a definitive failure", "a fast shutdown was not seen by Watch")
}
