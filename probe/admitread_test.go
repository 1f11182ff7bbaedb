package probe

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// chunkConn is a connection whose reads return its bytes in the given
// chunks, one a read, then io.EOF.
type chunkConn struct {
	net.Conn
	chunks [][]byte
	reads  int
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := copy(b, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// message is a protocol message of type typ with body.
func message(typ byte, body string) []byte {
	n := len(body) + 4
	return append([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

// The admission attempt's reads take what the connection has, not a
// header and then a body each: a session start's messages sent at once
// are one read, and messages split anywhere (across reads, a body longer
// than the buffer) come out whole, as they did; a connection that ends
// ends the read as io.ReadFull ended it, and a fork failure's text is
// read whatever was read ahead of it.
func TestAdmitterReads(t *testing.T) {
	long := strings.Repeat("x", 700)
	stream := bytes.Join([][]byte{message('R', "\x00\x00\x00\x00"), message('S', "server_version\x0015.0\x00"),
		message('S', "application_name\x00"+long+"\x00"), message('K', "\x00\x00\x00\x01\x00\x00\x00\x02"), message('Z', "I")}, nil)
	want := []struct {
		typ  byte
		body string
	}{{'R', "\x00\x00\x00\x00"}, {'S', "server_version\x0015.0\x00"}, {'S', "application_name\x00" + long + "\x00"},
		{'K', "\x00\x00\x00\x01\x00\x00\x00\x02"}, {'Z', "I"}}
	for _, split := range []int{0, 1, 3, 5, 6, 17, 300, len(stream) - 1} {
		var chunks [][]byte
		if split == 0 {
			chunks = [][]byte{bytes.Clone(stream)}
		} else {
			for b := bytes.Clone(stream); len(b) > 0; {
				k := min(split, len(b))
				chunks, b = append(chunks, b[:k]), b[k:]
			}
		}
		conn := &chunkConn{chunks: chunks}
		a := &admitter{conn: conn, buf: make([]byte, 256)}
		for i, w := range want {
			typ, body, err := a.next()
			if err != nil || typ != w.typ || string(body) != w.body {
				t.Fatalf("split %d, message %d: %q %q %v, want %q %q", split, i, typ, body, err, w.typ, w.body)
			}
		}
		if _, _, err := a.next(); err != io.EOF {
			t.Fatalf("split %d: after the last message %v, want io.EOF", split, err)
		}
		if split == 0 && conn.reads > 3 {
			t.Errorf("messages sent at once took %d reads, want at most 3 (the buffer grows once for the long one)", conn.reads)
		}
	}
	// As io.ReadFull of the header, then of the body: io.EOF when the
	// end came before any byte of the one, io.ErrUnexpectedEOF inside it.
	for cut, want := range map[int]error{2: io.ErrUnexpectedEOF, 5: io.EOF, 7: io.ErrUnexpectedEOF} {
		a := &admitter{conn: &chunkConn{chunks: [][]byte{message('S', "server_version\x0015.0\x00")[:cut]}}, buf: make([]byte, 256)}
		if _, _, err := a.next(); err != want {
			t.Errorf("a message cut after %d bytes: %v, want %v", cut, err, want)
		}
	}
	fork := "Ecould not fork new process for connection: Resource temporarily unavailable\n\x00"
	for _, split := range []int{1, 5, len(fork)} {
		a := &admitter{conn: &chunkConn{chunks: [][]byte{[]byte(fork[:split]), []byte(fork[split:])}}, buf: make([]byte, 256)}
		_, _, err := a.next()
		if !errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), "could not fork new process for connection: Resource temporarily unavailable") {
			t.Errorf("a fork failure read %d bytes at first: %v, want the postmaster's text, not serving", split, err)
		}
	}
}
