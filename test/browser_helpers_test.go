package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/websocket"

	"github.com/pgdns/pgdns/internal/testkit"
)

// A real browser for the status page's tests: Debian's
// chromium-headless-shell (or chromium), driven by its command line
// (--dump-dom, --screenshot) and, for a page kept open, by the DevTools
// protocol over its WebSocket (golang.org/x/net/websocket: no new module).

// browserTimeout bounds one browser run (start, load, dump) on a loaded
// machine.
const browserTimeout = 60 * time.Second

// chromium returns the browser's path, under testkit.Require's rule: a
// missing browser fails under CI and skips elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "chromium", "/usr/lib/chromium/chromium-headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testkit.Require(t, errors.New("chromium-headless-shell is not installed (apt-get install chromium-headless-shell)"))
	return ""
}

// browserArgs are the flags of every run: a profile of its own (a
// directory under t.TempDir), nothing fetched but the page, and no sandbox
// when running as root (chromium refuses to start as root with one).
func browserArgs(profile string, extra ...string) []string {
	args := []string{"--user-data-dir=" + profile, "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--disable-background-networking", "--disable-sync", "--disable-component-update", "--hide-scrollbars",
		"--window-size=1280,800"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox")
	}
	return append(args, extra...)
}

// browserCommand is the browser's command, run in a process group of its
// own and killed as a group when ctx ends: Debian's chromium-headless-shell
// is a shell script that runs the browser as its child, and the browser
// starts zygote, GPU and network processes of its own, so killing the
// started process alone left every one of them running after the test
// (found as orphans of TestStatusPageInABrowser hours after CI runs).
func browserCommand(ctx context.Context, t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, chromium(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Its helper processes may hold stdout open after it is killed.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runBrowser runs the browser with args and returns what it printed.
func runBrowser(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	cmd := browserCommand(ctx, t, browserArgs(t.TempDir(), args...))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, lastBytes(stderr.String(), 2000))
	}
	return string(out)
}

// dumpDOM loads url and returns the DOM as the browser built it, after
// its scripts ran at load, parsed.
func dumpDOM(t *testing.T, url string, extra ...string) *html.Node {
	t.Helper()
	out := runBrowser(t, append(extra, "--dump-dom", url)...)
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("the dumped DOM does not parse: %v", err)
	}
	return doc
}

// screenshot loads url in a window w×h and writes a PNG to path.
func screenshot(t *testing.T, url, path string, w, h int) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	runBrowser(t, fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+abs, url)
	if b, err := os.ReadFile(abs); err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("no PNG written to %s (%d bytes, %v)", abs, len(b), err)
	}
}

// livePage is a page kept open in a browser, read through DevTools.
type livePage struct {
	ws   *websocket.Conn
	next int
}

// openPage starts the browser on url (with the flags extra) and connects
// to the page's DevTools socket. The browser is stopped when the test
// ends.
func openPage(t *testing.T, url string, extra ...string) *livePage {
	t.Helper()
	profile := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	args := browserArgs(profile, append(extra, "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=0", "--remote-allow-origins=http://127.0.0.1", url)...)
	cmd := browserCommand(ctx, t, args)
	stderr := &testkit.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	// The browser writes its DevTools port into the profile once it
	// listens.
	port := testkit.Eventually(t, browserTimeout, 50*time.Millisecond, "chromium's DevToolsActivePort", func() (string, bool) {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		port, _, _ := strings.Cut(string(b), "\n")
		return port + " " + lastBytes(stderr.String(), 500), err == nil && port != ""
	})
	port, _, _ = strings.Cut(port, " ")
	var targets []struct{ Type, URL, WebSocketDebuggerURL string }
	testkit.Eventually(t, browserTimeout, 50*time.Millisecond, "the page's DevTools target", func() (string, bool) {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err != nil {
			return err.Error(), false
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
			return err.Error(), false
		}
		for _, tg := range targets {
			if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
				return "", true
			}
		}
		return fmt.Sprint(targets), false
	})
	for _, tg := range targets {
		if tg.Type == "page" {
			ws, err := websocket.Dial(tg.WebSocketDebuggerURL, "", "http://127.0.0.1")
			if err != nil {
				t.Fatalf("DevTools socket: %v", err)
			}
			t.Cleanup(func() { _ = ws.Close() })
			return &livePage{ws: ws}
		}
	}
	panic("unreachable")
}

// eval evaluates a JavaScript expression in the page and returns its
// value as JSON.
func (p *livePage) eval(t *testing.T, expr string) (json.RawMessage, error) {
	t.Helper()
	p.next++
	id := p.next
	_ = p.ws.SetDeadline(time.Now().Add(10 * time.Second))
	req := map[string]any{"id": id, "method": "Runtime.evaluate", "params": map[string]any{"expression": expr, "returnByValue": true}}
	if err := websocket.JSON.Send(p.ws, req); err != nil {
		return nil, err
	}
	for {
		var resp struct {
			ID     int `json:"id"`
			Result struct {
				Result struct {
					Value json.RawMessage `json:"value"`
				} `json:"result"`
				ExceptionDetails json.RawMessage `json:"exceptionDetails"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := websocket.JSON.Receive(p.ws, &resp); err != nil {
			return nil, err
		}
		if resp.ID != id {
			continue // an event, or an answer to an earlier call
		}
		switch {
		case resp.Error != nil:
			return nil, fmt.Errorf("DevTools: %s", resp.Error)
		case resp.Result.ExceptionDetails != nil:
			return nil, fmt.Errorf("%s threw: %s", expr, resp.Result.ExceptionDetails)
		}
		return resp.Result.Result.Value, nil
	}
}

// evalString evaluates an expression whose value is a string.
func (p *livePage) evalString(t *testing.T, expr string) string {
	t.Helper()
	raw, err := p.eval(t, expr)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %s is not a string", expr, raw)
	}
	return s
}

// findNode returns the first element under n that match accepts, or nil.
func findNode(n *html.Node, match func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && match(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if m := findNode(c, match); m != nil {
			return m
		}
	}
	return nil
}

// attr returns n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// hasClass reports whether n carries class c.
func hasClass(n *html.Node, c string) bool {
	for _, f := range strings.Fields(attr(n, "class")) {
		if f == c {
			return true
		}
	}
	return false
}

// text is the text content of n, whitespace collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
