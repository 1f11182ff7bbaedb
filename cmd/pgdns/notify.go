package main

import (
	"context"
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/pgdns/pgdns/internal/app"
)

// notify tells the service manager (systemd with Type=notify) what pgdns
// is doing, when it started pgdns with NOTIFY_SOCKET set; otherwise it does
// nothing. A failure is logged and otherwise ignored: pgdns serves the
// same whether or not systemd heard it.
func notify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify failed", "state", state, "error", err)
	}
}

// notifyReady sends READY=1 when the first probe round has finished (the
// moment answers stop being SERVFAIL and /readyz turns 200), so that
// `systemctl start` returns, and units ordered after pgdns start, only once
// pgdns answers. It gives up when ctx ends first.
func notifyReady(ctx context.Context, a *app.App, log *slog.Logger) {
	select {
	case <-a.Table().Ready():
		notify(log, daemon.SdNotifyReady)
	case <-ctx.Done():
	}
}

// stopping returns a context that ends when ctx does, after STOPPING=1 has
// been sent, so that the service manager knows the shutdown is pgdns's own
// before the listeners close. release ends the watch when pgdns stops on
// its own.
func stopping(ctx context.Context, log *slog.Logger) (serve context.Context, release func()) {
	serve, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer cancel()
		select {
		case <-ctx.Done():
			notify(log, daemon.SdNotifyStopping)
		case <-done:
		}
	}()
	return serve, func() { close(done) }
}

// isReady tells whether the first probe round has finished.
func isReady(a *app.App) bool {
	select {
	case <-a.Table().Ready():
		return true
	default:
		return false
	}
}
