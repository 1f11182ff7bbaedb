package probe

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocListsEveryFile keeps the file table in doc.go true: every source
// file of the package is listed there once, and nothing else.
func TestDocListsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z]+\.go) `).FindAllSubmatch(doc, -1) {
		listed = append(listed, string(m[1]))
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && n != "doc.go" {
			files = append(files, n)
		}
	}
	slices.Sort(files)
	sorted := slices.Clone(listed)
	slices.Sort(sorted)
	if !slices.Equal(sorted, slices.Compact(slices.Clone(sorted))) || !slices.Equal(sorted, files) {
		t.Errorf("doc.go lists %v\nthe package has %v", listed, files)
	}
}
