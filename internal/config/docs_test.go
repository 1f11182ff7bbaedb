package config

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The configuration table (docs/configuration.md) and configs/pgdns.yaml
// document the declared keys (keys.go): every key is there, nothing is
// there that is not declared, and a key with a default shows that default. Keys an
// example leaves commented out ("# patroni: [...]") count as documented.
// deploy/kubernetes/pgdns.yaml sets values of its own on purpose; the
// deploy tests load it with Load, which refuses an undeclared key.
// configs/pgdns.yaml, the config the image and the systemd unit ship,
// differs from the defaults only in shipped.
func TestDocsMatchDeclarations(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(page), "# Configuration\n")
	_, table, _ := strings.Cut(after, "```yaml\n")
	table, _, found := strings.Cut(table, "```")
	if !found {
		t.Fatal("docs/configuration.md: no ```yaml block under # Configuration")
	}
	example, err := os.ReadFile("../../configs/pgdns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for doc, text := range map[string]string{"docs/configuration.md": table, "configs/pgdns.yaml": string(example)} {
		own := map[string]any{}
		if doc == "configs/pgdns.yaml" {
			own = shipped
		}
		t.Run(doc, func(t *testing.T) {
			var tree map[string]any
			if err := yaml.Unmarshal([]byte(uncomment(text)), &tree); err != nil {
				t.Fatal(err)
			}
			documented := map[string]any{}
			flatten("", tree, documented)
			checkDocumented(t, doc, documented, own)
		})
	}
}

// shipped are the values configs/pgdns.yaml sets instead of the defaults:
// it probes as the role docs/operating.md's "The probe role" creates.
var shipped = map[string]any{"probe.dsn": "user=pgdns dbname=postgres"}

// checkDocumented checks doc's keys against the declarations; own holds
// the values doc sets on purpose instead of the defaults.
func checkDocumented(t *testing.T, doc string, documented, own map[string]any) {
	t.Helper()
	seen := map[string]bool{}
	names := slices.Sorted(maps.Keys(documented))
	for _, name := range names {
		value := documented[name]
		decl, def, ok := declaration(name)
		if !ok {
			t.Errorf("%s documents %s, which is not a declared key", doc, name)
			continue
		}
		seen[decl] = true
		if v, ok := own[name]; ok {
			def = v
		}
		if def != nil && fmt.Sprint(value) != fmt.Sprint(def) {
			t.Errorf("%s documents %s: %v, but its default is %v", doc, name, value, def)
		}
	}
	for _, k := range topKeys {
		if !seen[k.name] {
			t.Errorf("%s does not document %s (%s)", doc, k.name, k.doc)
		}
	}
	for _, k := range clusterKeys {
		if !seen["clusters.*."+k.name] {
			t.Errorf("%s does not document clusters.<name>.%s (%s)", doc, k.name, k.doc)
		}
	}
}

// declaration returns the name of the declaration of a documented key
// (clusters.*.<key> for a cluster's) and its default. A map may be
// documented empty ("locations: {}") or with entries.
func declaration(name string) (string, any, bool) {
	matches := func(decl string, isMap bool, k string) bool {
		return declares(decl, isMap, k) || (isMap && k == decl)
	}
	if rest, ok := strings.CutPrefix(name, "clusters."); ok {
		_, field, _ := strings.Cut(rest, ".")
		i := slices.IndexFunc(clusterKeys, func(d clusterKey) bool { return matches(d.name, d.isMap, field) })
		if i < 0 {
			return "", nil, false
		}
		return "clusters.*." + clusterKeys[i].name, nil, true
	}
	i := slices.IndexFunc(topKeys, func(d key) bool { return matches(d.name, d.isMap, name) })
	if i < 0 {
		return "", nil, false
	}
	return topKeys[i].name, topKeys[i].def, true
}

// flatten puts every leaf of tree under its dotted key; an empty map is a
// leaf.
func flatten(prefix string, tree map[string]any, out map[string]any) {
	for k, v := range tree {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			flatten(prefix+k+".", m, out)
			continue
		}
		out[prefix+k] = v
	}
}

// commentedKey is a key an example leaves commented out: "# key:" alone,
// or followed by a YAML value (a list, a map, a quoted string, a number),
// not by prose ("# all: every live replica...").
var commentedKey = regexp.MustCompile(`^(\s*)# (\s*[a-z_]+:(?:\s*|\s+["'\[{0-9].*))$`)

// uncomment turns each commented-out key into a key, keeping its
// indentation.
func uncomment(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		lines[i] = commentedKey.ReplaceAllString(line, "$1$2")
	}
	return strings.Join(lines, "\n")
}

func TestUncomment(t *testing.T) {
	in := "clusters:\n  main:\n    # patroni: [http://a:8008]\n    # all: every live replica; async: none\n    # locations:\n    #   east: [h:1]\n    # system_identifier: \"7\"\n"
	want := "clusters:\n  main:\n    patroni: [http://a:8008]\n    # all: every live replica; async: none\n    locations:\n      east: [h:1]\n    system_identifier: \"7\"\n"
	if got := uncomment(in); got != want {
		t.Fatalf("uncomment:\n%s\nwant\n%s", got, want)
	}
}
