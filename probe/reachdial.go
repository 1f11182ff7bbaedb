//go:build !linux

package probe

import (
	"context"
	"time"
)

// rawConnect is reach.go's socket of the checker's own, Linux's alone:
// elsewhere every bare connect is dialed (tryConnect).
type rawConnect struct{}

func startRawConnect(string, uint16, time.Duration) *rawConnect { return nil }

func (*rawConnect) poll() (bool, error) { return true, nil }

func (*rawConnect) close() {}

func (*rawConnect) handOver() (func(context.Context, *connConfig) error, time.Time) {
	return nil, time.Time{}
}
