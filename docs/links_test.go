package docs

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestLinksResolve reads README.md and every page under docs/ and checks
// each relative link: the file (or folder) it names exists, and its
// #anchor, if any, is a heading of the page it leads to, by GitHub's rule
// for heading anchors. Links to other sites are not followed. Every page
// under docs/ must be reachable from the README, page by page: a page no
// link leads to is lost to readers.
func TestLinksResolve(t *testing.T) {
	const readme = "../README.md"
	pages := []string{readme}
	// Every path is written from here through the repository's root
	// ("../docs/names.md"), so that two spellings of a page compare equal.
	err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	leadsTo := map[string][]string{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(text)) {
			file, problem := resolve(page, l.target)
			if problem != "" {
				t.Errorf("%s:%d: link %q: %s", page, l.line, l.target, problem)
			}
			if file != "" {
				leadsTo[page] = append(leadsTo[page], file)
			}
		}
	}
	reached := map[string]bool{readme: true}
	for next := []string{readme}; len(next) > 0; {
		page := next[0]
		next = next[1:]
		for _, file := range leadsTo[page] {
			if !reached[file] {
				reached[file] = true
				next = append(next, file)
			}
		}
	}
	for _, page := range pages {
		if !reached[page] {
			t.Errorf("%s: no link leads to it from README.md, or from a page a link there leads to", page)
		}
	}
}

// resolve returns the file a link on page leads to ("" for another site)
// and what is wrong with it ("" when nothing is).
func resolve(page, target string) (file, problem string) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "", "" // another site: not followed
	}
	file = page
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return "", "absolute path: write it relative to the page"
		}
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(u.Path))
	}
	info, err := os.Stat(file)
	if err != nil {
		return "", "no such file " + file
	}
	if u.Fragment == "" {
		return file, ""
	}
	if info.IsDir() || !strings.HasSuffix(file, ".md") {
		return file, "an anchor into " + file + ", which is not a page"
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return file, err.Error()
	}
	if !anchors(string(text))[u.Fragment] {
		return file, "no heading in " + file + " has the anchor #" + u.Fragment
	}
	return file, ""
}

// link is one [text](target) of a page, with its line.
type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// links returns the links of a Markdown text, leaving out code blocks and
// code spans, where brackets are not links.
func links(text string) []link {
	var out []link
	for i, line := range lines(text) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{m[1], i + 1})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{m[1], i + 1})
		}
	}
	return out
}

// lines returns the lines of text with those inside fenced code blocks
// blanked, so that line numbers stay right.
func lines(text string) []string {
	all := strings.Split(text, "\n")
	fence := ""
	for i, line := range all {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			all[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			all[i] = ""
		}
	}
	return all
}

// anchors returns the anchors GitHub gives the headings of a page.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range lines(text) {
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		s := slug(line[hashes:])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: its text (a link's text, not its
// target) in lower case, spaces turned into hyphens, and every character
// but letters, digits, '-' and '_' dropped.
func slug(heading string) string {
	heading = headingLink.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// GitHub's anchors of headings pgdns's pages have, as github.com renders
// them.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Locality: the client's own data centre first":            "locality-the-clients-own-data-centre-first",
		"Resolver settings: glibc (libpq, psql and most drivers)": "resolver-settings-glibc-libpq-psql-and-most-drivers",
		"Lag, computed right":                                     "lag-computed-right",
		"Two instances: one frozen or killed":                     "two-instances-one-frozen-or-killed",
		"`dns.lsn_wait` and the [probe](probe.md)":                "dnslsn_wait-and-the-probe",
		"A — B": "a--b",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	got := anchors("# Limits\n```\n# not a heading\n```\n## Limits\n#nospace\n")
	for _, want := range []string{"limits", "limits-1"} {
		if !got[want] {
			t.Errorf("anchors: no %q in %v", want, got)
		}
	}
	if len(got) != 2 {
		t.Errorf("anchors: %v, want limits and limits-1 only", got)
	}
}
