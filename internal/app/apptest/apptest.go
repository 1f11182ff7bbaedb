// Package apptest starts the whole of pgdns in-process for the tests of
// other packages (the examples), the way the command does: a config file
// through the real loader, then app.New and Start. internal/app's own
// tests cannot import it (it imports app) and keep their startApp.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
)

// Start writes yaml to a config file, loads it with config.Load, starts
// pgdns with its logs discarded, and stops it when the test ends.
func Start(t testing.TB, yaml string) *app.App {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), app.ShutdownTimeout)
		defer cancel()
		_ = a.Stop(ctx)
	})
	return a
}
