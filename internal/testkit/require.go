package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// CI reports whether the tests run under CI (CI set, as .ci/run does),
// where every dependency is installed and every test must run.
func CI() bool { return os.Getenv("CI") != "" }

// Require stops t when a dependency is missing (err != nil): under CI,
// where .ci/run installs everything, the test fails, so a missing install
// never passes green; on a developer's machine it is skipped.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if CI() {
		t.Fatalf("CI=%s and %v", os.Getenv("CI"), err)
	}
	t.Skip(err)
}

// RequireTool finds a program on PATH, under Require's rule.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Require(t, fmt.Errorf("%s is not installed", name))
	}
	return path
}

// RequireRoot stops a test that needs root, under Require's rule; why
// says what needs it.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Require(t, errors.New("needs root: "+why))
	}
}

// SkipShort skips an end-to-end test under go test -short (make
// test-unit); why says what makes it one. Under CI it never skips: CI runs
// every test, and -short there must not hide one.
func SkipShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && !CI() {
		t.Skip("-short: " + why)
	}
}
