package accesslog

import (
	"sync/atomic"
	"time"
)

// stamps formats the times of lines as t.AppendFormat does with hclog's
// layouts, hclog.TimeFormat (milliseconds, zone as "Z0700") or
// hclog.TimeFormatJSON (microseconds, zone as "Z07:00"). Formatting a time
// costs more than the rest of a line, and lines of the same second share
// all but the fraction: the latest second is kept formatted.
type stamps struct {
	digits int    // of the fraction, truncated as Go formats it
	zone   string // the zone's layout
	last   atomic.Pointer[stamp]
}

// stamp is one formatted second. It is immutable.
type stamp struct {
	sec          int64
	loc          *time.Location
	second, zone []byte
}

func (c *stamps) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	s := c.last.Load()
	if s == nil || s.sec != sec || s.loc != loc {
		s = &stamp{sec: sec, loc: loc, second: t.AppendFormat(nil, "2006-01-02T15:04:05"), zone: t.AppendFormat(nil, c.zone)}
		c.last.Store(s)
	}
	b = append(b, s.second...)
	b = append(b, '.')
	frac := t.Nanosecond()
	for range 9 - c.digits {
		frac /= 10
	}
	var d [9]byte
	for i := c.digits - 1; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	b = append(b, d[:c.digits]...)
	return append(b, s.zone...)
}
