package remote

import (
	"strconv"
	"strings"
)

// contentRange is a parsed Content-Range header (RFC 9110 section 14.4):
// "bytes first-last/size", "bytes first-last/*" or "bytes */size".
type contentRange struct {
	first, last uint64 // inclusive; meaningful when !unsatisfied
	size        uint64 // meaningful when sizeKnown
	sizeKnown   bool
	unsatisfied bool // "bytes */size" (a 416's answer)
}

// parseContentRange parses h strictly: the unit "bytes" (any case), one
// space, decimal numbers without signs that fit in 63 bits, first <= last,
// and last < size when the size is known. ok is false for anything else.
func parseContentRange(h string) (cr contentRange, ok bool) {
	h = strings.TrimSpace(h)
	const unit = "bytes "
	if len(h) < len(unit) || !strings.EqualFold(h[:len(unit)], unit) {
		return cr, false
	}
	h = h[len(unit):]
	slash := strings.IndexByte(h, '/')
	if slash < 0 {
		return cr, false
	}
	rng, size := h[:slash], h[slash+1:]
	if size == "*" {
		if rng == "*" {
			return cr, false // "*/*" says nothing
		}
	} else {
		n, ok := parseDecimal(size)
		if !ok {
			return cr, false
		}
		cr.size, cr.sizeKnown = n, true
	}
	if rng == "*" {
		cr.unsatisfied = true
		return cr, true
	}
	dash := strings.IndexByte(rng, '-')
	if dash < 0 {
		return cr, false
	}
	first, ok1 := parseDecimal(rng[:dash])
	last, ok2 := parseDecimal(rng[dash+1:])
	if !ok1 || !ok2 || first > last || (cr.sizeKnown && last >= cr.size) {
		return cr, false
	}
	cr.first, cr.last = first, last
	return cr, true
}

// parseDecimal parses 1 to 18 ASCII digits (so the value fits in int64 with
// room for the +1 of an inclusive range).
func parseDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// String formats cr back into a header value (the inverse of
// parseContentRange on what it accepts, modulo case and leading zeros).
func (cr contentRange) String() string {
	size := "*"
	if cr.sizeKnown {
		size = strconv.FormatUint(cr.size, 10)
	}
	if cr.unsatisfied {
		return "bytes */" + size
	}
	return "bytes " + strconv.FormatUint(cr.first, 10) + "-" + strconv.FormatUint(cr.last, 10) + "/" + size
}
