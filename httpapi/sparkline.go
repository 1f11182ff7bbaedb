package httpapi

import (
	"strconv"
	"time"
)

// Sparkline geometry, in SVG user units (the page scales the SVG).
const (
	sparkWidth  = 150
	sparkHeight = 28
	sparkPad    = 2
	sparkMinMax = 10 // ms: a flat line of 0–2 ms does not fill the box
)

// sparkline is a replica's lag over the window, drawn as SVG path data:
// Line joins the samples whose lag was vouched for, broken where it was
// not; Unknown underlines each stretch of such samples at the bottom. Only
// numbers go into the paths, and the template escapes them anyway.
type sparkline struct {
	Width, Height int
	FrameWidth    int // of the box drawn around it
	FrameHeight   int
	Line          string // path data, "" when no sample has a known lag
	Unknown       string // path data of the unknown stretches
	Max           int32  // ms at the top of the box
	Peak          int32  // the highest lag in the window, ms; -1 when none known
	PeakText      string // Peak for people ("6.1 s"), "" when none known
	Samples       int    // samples in the window
	Window        time.Duration
}

// drawSparkline draws points (oldest first) over the window that ends at
// now: time runs left to right, 0 ms at the bottom.
func drawSparkline(points []lagPoint, now time.Time, window time.Duration) sparkline {
	window = max(window, time.Millisecond)
	s := sparkline{Width: sparkWidth, Height: sparkHeight, FrameWidth: sparkWidth - 1, FrameHeight: sparkHeight - 1, Max: sparkMinMax, Peak: -1, Samples: len(points), Window: window}
	for _, p := range points {
		s.Peak = max(s.Peak, p.ms)
	}
	s.Max = max(s.Max, s.Peak)
	if s.Peak >= 0 {
		s.PeakText = fmtDuration(time.Duration(s.Peak) * time.Millisecond)
	}
	start := now.Add(-window)
	x := func(at time.Time) int {
		f := float64(at.Sub(start)) / float64(window)
		return sparkPad + int(min(max(f, 0), 1)*float64(sparkWidth-2*sparkPad))
	}
	y := func(ms int32) int {
		return sparkHeight - sparkPad - int(float64(ms)/float64(s.Max)*float64(sparkHeight-2*sparkPad))
	}
	line := make([]byte, 0, 64)
	unknown := make([]byte, 0, 16)
	var run []point // the known samples since the last unknown one
	gap := -1       // x of the first unknown sample of the current gap, -1 when none
	last := 0       // x of the previous sample
	endGap := func() {
		if gap >= 0 {
			unknown = appendPoint(unknown, 'M', gap, sparkHeight-1)
			unknown = appendPoint(unknown, 'L', last, sparkHeight-1)
			gap = -1
		}
	}
	for _, p := range points {
		px := x(p.at)
		if p.ms < 0 {
			line = appendRun(line, run)
			run = run[:0]
			if gap < 0 {
				gap = px
			}
		} else {
			endGap()
			run = append(run, point{px, y(p.ms)})
		}
		last = px
	}
	line = appendRun(line, run)
	endGap()
	s.Line, s.Unknown = string(line), string(unknown)
	return s
}

// point is a sample's place in the box.
type point struct{ x, y int }

// appendRun draws one unbroken run of known samples. A point between two
// at its height adds nothing to the line and is left out, so that a
// steady lag, the common case, costs two points rather than 150. A lone
// sample is a dot: a zero-length line with round caps.
func appendRun(b []byte, run []point) []byte {
	if len(run) == 0 {
		return b
	}
	b = appendPoint(b, 'M', run[0].x, run[0].y)
	if len(run) == 1 {
		return appendPoint(b, 'l', 0, 0)
	}
	for i := 1; i < len(run); i++ {
		if i+1 < len(run) && run[i].y == run[i-1].y && run[i].y == run[i+1].y {
			continue
		}
		b = appendPoint(b, 'L', run[i].x, run[i].y)
	}
	return b
}

func appendPoint(b []byte, cmd byte, x, y int) []byte {
	b = append(b, cmd)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, ' ')
	return strconv.AppendInt(b, int64(y), 10)
}
