// Package apptest starts the whole of pgdns in-process, the way the command
// does: a config file through the real loader, then app.New and Start. It is
// the one starter of the end-to-end tests (test/) and of the examples' tests;
// the cluster in front of which pgdns runs is test/'s env helper.
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
	"github.com/pgdns/pgdns/internal/testkit"
)

// Start writes yaml to a config file, loads it with config.Load and starts
// pgdns, which stops when the test ends. It returns the running App, the
// config it was loaded with and its logs, which are also printed with -v.
func Start(t testing.TB, yaml string) (*app.App, *config.Config, *testkit.Buffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), app.ShutdownTimeout)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return a, cfg, logs
}
