package zone

import "testing"

// TestTableReady: Ready closes with the first ready Snapshot stored, not
// before, and by then Load already returns it (what READY=1 relies on).
func TestTableReady(t *testing.T) {
	tab := NewTable()
	closed := func() bool {
		select {
		case <-tab.Ready():
			return true
		default:
			return false
		}
	}
	if closed() {
		t.Fatal("a new Table is ready")
	}
	tab.Store(&Snapshot{})
	if closed() {
		t.Fatal("Ready closed by an unready Snapshot")
	}
	tab.Store(&Snapshot{Ready: true})
	if !closed() || !tab.Load().Ready {
		t.Fatalf("after a ready Snapshot: Ready closed %v, Load().Ready %v", closed(), tab.Load().Ready)
	}
	tab.Store(&Snapshot{Ready: true}) // a second ready Snapshot does not close it twice
	if !closed() {
		t.Fatal("Ready reopened")
	}
}
