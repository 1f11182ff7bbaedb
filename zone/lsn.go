package zone

import (
	"errors"
	"strconv"
	"strings"
)

// LSN is a PostgreSQL write-ahead log position (pg_lsn): a byte offset into
// the WAL stream that grows monotonically on one timeline.
type LSN uint64

// ErrBadLSN is returned by ParseLSN for text that is not of the form X/Y.
var ErrBadLSN = errors.New(`LSN must be two hex numbers of at most 8 digits, as "X/Y"`)

// ParseLSN parses an LSN as PostgreSQL prints it: "16/B374D848".
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, ErrBadLSN
	}
	h, ok1 := parseHex32(hi)
	l, ok2 := parseHex32(lo)
	if !ok1 || !ok2 {
		return 0, ErrBadLSN
	}
	return LSN(uint64(h)<<32 | uint64(l)), nil
}

// String formats l as PostgreSQL does: upper-case hex halves joined by "/".
func (l LSN) String() string {
	b := make([]byte, 0, 17)
	b = l.AppendText(b)
	return string(b)
}

// AppendText appends the PostgreSQL form of l to b.
func (l LSN) AppendText(b []byte) []byte {
	b = appendUpperHex(b, uint32(l>>32))
	b = append(b, '/')
	return appendUpperHex(b, uint32(l))
}

// Label is l as an lsn- name carries it (lsn-0-3000060.replica): the two
// halves in lower-case hex joined by '-'. Query.Name writes it and Parse
// reads it; everyone who builds an lsn- name calls this.
func (l LSN) Label() string {
	b := make([]byte, 0, 17)
	return string(l.AppendLabel(b))
}

// AppendLabel appends the Label form of l to b.
func (l LSN) AppendLabel(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(l.Hi()), 16)
	b = append(b, '-')
	return strconv.AppendUint(b, uint64(l.Lo()), 16)
}

// Hi and Lo are the two 32-bit halves of l, as in "Hi/Lo".
func (l LSN) Hi() uint32 { return uint32(l >> 32) }

// Lo is the low 32-bit half of l.
func (l LSN) Lo() uint32 { return uint32(l) }

func appendUpperHex(b []byte, v uint32) []byte {
	start := len(b)
	b = strconv.AppendUint(b, uint64(v), 16)
	for i := start; i < len(b); i++ {
		if c := b[i]; c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return b
}

// parseHex32 parses 1 to 8 hex digits of either case without allocating.
func parseHex32(s string) (uint32, bool) {
	if len(s) == 0 || len(s) > 8 {
		return 0, false
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		d, ok := hexDigit(s[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | uint32(d)
	}
	return v, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// The sizes of a WAL page's header on the 64-bit builds PostgreSQL runs
// on (SizeOfXLogShortPHD, SizeOfXLogLongPHD): a segment's first page has
// the long one.
const (
	shortPageHeader = 24
	longPageHeader  = 40
)

// PageBoundary reads l back across a WAL page header: when l is just past
// the header of a page (24 bytes into it, or 40 into a segment's first
// page), it returns the page's start, else l. No record ends inside a
// header, so every record before l ends at or before the page's start,
// and the two positions are exactly equivalent: a replica that has
// replayed every record stops at the boundary, while
// pg_current_wal_insert_lsn() points past the header. blockSize and
// segmentSize are the server's wal_block_size and wal_segment_size, in
// bytes; 0 (not known) leaves l as it is. Only a segment's first page has
// a 40-byte header: elsewhere a record may end 40 bytes into a page, and
// that position stays.
func (l LSN) PageBoundary(blockSize, segmentSize uint64) LSN {
	switch {
	case blockSize == 0 || segmentSize == 0:
		return l
	case uint64(l)%blockSize == shortPageHeader:
		return l - shortPageHeader
	case uint64(l)%segmentSize == longPageHeader:
		return l - longPageHeader
	}
	return l
}
