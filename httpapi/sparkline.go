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
// not; Unknown puts a tick at the bottom for each such sample. Only
// numbers go into the paths, and the template escapes them anyway.
type sparkline struct {
	Width, Height int
	FrameWidth    int // of the box drawn around it
	FrameHeight   int
	Line          string // path data, "" when no sample has a known lag
	Unknown       string // path data of the unknown ticks
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
	line := make([]byte, 0, 10*len(points))
	unknown := make([]byte, 0, 16)
	pen := false // the line is drawing: the previous sample was known
	for _, p := range points {
		if p.ms < 0 {
			pen = false
			unknown = appendPoint(unknown, 'M', x(p.at), sparkHeight)
			unknown = appendPoint(unknown, 'L', x(p.at), sparkHeight-sparkPad-2)
			continue
		}
		cmd := byte('L')
		if !pen {
			cmd = 'M'
		}
		line = appendPoint(line, cmd, x(p.at), y(p.ms))
		if !pen {
			// A lone known sample is a dot: a zero-length line with round caps.
			line = appendPoint(line, 'l', 0, 0)
		}
		pen = true
	}
	s.Line, s.Unknown = string(line), string(unknown)
	return s
}

func appendPoint(b []byte, cmd byte, x, y int) []byte {
	b = append(b, cmd)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, ' ')
	return strconv.AppendInt(b, int64(y), 10)
}
