package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestPollStopsWhenTheConditionHolds(t *testing.T) {
	n := 0
	if !Poll(time.Minute, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Fatal("Poll gave up on a condition that held")
	}
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestPollGivesUpAfterWithin(t *testing.T) {
	start := time.Now()
	n := 0
	if Poll(20*time.Millisecond, time.Millisecond, func() bool { n++; return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the 20ms deadline", took)
	}
	if n < 2 {
		t.Fatalf("cond called %d times, want it called again after the deadline", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and
// stops the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestEventuallyNamesTheLastValue(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	n := 0
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("Eventually did not fail: %v", r)
			}
		}()
		Eventually(rec, 10*time.Millisecond, time.Millisecond, "n to reach -1", func() (int, bool) { n++; return n, false })
	}()
	want := fmt.Sprintf("n to reach -1: not within 10ms; last observed: %d", n)
	if rec.msg != want {
		t.Fatalf("failure message %q, want %q", rec.msg, want)
	}
	if got := Eventually(t, time.Minute, time.Millisecond, "n to reach a multiple of 5", func() (int, bool) { n++; return n, n%5 == 0 }); got%5 != 0 {
		t.Fatalf("Eventually returned %d, not the value that passed", got)
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("got %d bytes, want 800", len(got))
	}
}

func TestHoldsStopsAtTheFirstFailure(t *testing.T) {
	n := 0
	if passed, ok := Holds(time.Minute, time.Millisecond, func() bool { n++; return n < 4 }); ok || passed != 3 {
		t.Fatalf("Holds = %d, %v; want 3 checks passed, then the failure", passed, ok)
	}
	start := time.Now()
	if passed, ok := Holds(20*time.Millisecond, time.Millisecond, func() bool { return true }); !ok || passed < 2 {
		t.Fatalf("Holds = %d, %v; want several checks, all passed", passed, ok)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("Holds returned after %v, before its 20ms", took)
	}
}

// DelayProxy holds what the client sends for the delay, and passes what
// the server sends back at once.
func TestDelayProxy(t *testing.T) {
	echo := echoServer(t, "hello\n") // unprompted: not delayed
	const delay = 300 * time.Millisecond
	proxy := DelayProxy(t, "127.0.0.1:0", echo, delay)
	c, err := net.Dial("tcp", proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	start := time.Now()
	if line, err := r.ReadString('\n'); err != nil || line != "hello\n" || time.Since(start) >= delay {
		t.Fatalf("server's greeting %q %v after %v, want at once", line, err, time.Since(start))
	}
	for _, msg := range []string{"one\n", "two\n"} {
		sent := time.Now()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if took := time.Since(sent); err != nil || line != msg || took < delay {
			t.Fatalf("echo of %q: %q %v after %v, want it after at least %v", msg, line, err, took, delay)
		}
	}
}

// Cut ends the connections the proxy carries, with a reset or a plain
// end, and the proxy keeps carrying new ones.
func TestProxyCut(t *testing.T) {
	proxy := StartProxy(t, "127.0.0.1:0", echoServer(t, ""), 0)
	for _, rst := range []bool{true, false} {
		c, err := net.Dial("tcp", proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo through the proxy: %q %v", line, err)
		}
		proxy.Cut(rst)
		_, err = r.ReadString('\n')
		if rst && !errors.Is(err, syscall.ECONNRESET) || !rst && err != io.EOF {
			t.Errorf("read after Cut(%v): %v, want %s", rst, err, map[bool]string{true: "a reset", false: "EOF"}[rst])
		}
	}
}

// echoServer listens on a loopback port until the test ends, sends each
// connection greeting, then echoes what it reads; it returns the address.
func echoServer(t *testing.T, greeting string) string {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write([]byte(greeting))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return echo.Addr().String()
}
