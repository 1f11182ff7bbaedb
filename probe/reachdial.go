//go:build !linux

package probe

import (
	"context"
	"time"
)

// rawConnect is reach.go's socket of the checker's own, Linux's alone:
// elsewhere every bare connect is dialed (tryConnect), and none is a
// cancel of the session's own backend (reachcancel.go's fields stay
// false: startRawCancel gives no socket to signal with).
type rawConnect struct{ cancel, asked, signalled bool }

func startRawConnect(string, uint16, time.Duration) *rawConnect { return nil }

func startRawCancel(string, uint16, time.Duration, uint32, uint32) *rawConnect { return nil }

func (*rawConnect) send() bool { return false }

func (*rawConnect) settle(time.Time) bool { return true }

func (*rawConnect) poll() (bool, error) { return true, nil }

func (*rawConnect) close() {}

func (*rawConnect) handOver() (func(context.Context, *connConfig) error, time.Time) {
	return nil, time.Time{}
}

// startRawAdmission is admitpoll.go's poller, Linux's alone: elsewhere
// every admission attempt is dialed (tryAdmission).
func startRawAdmission(*connConfig, time.Duration) (chan error, func()) { return nil, nil }
