package objects

import (
	"encoding/binary"
	"io"
	"math"
	"strconv"
	"strings"
)

// Python literal values of an npy header. A tuple keeps its own type so that
// "(3)" (an int in Python) and "(3,)" (a tuple) stay different, as in numpy.
type (
	pyNone  struct{}
	pyTuple []any
	pyList  []any
	pyDict  struct {
		keys []string // in header order
		vals map[string]any
	}
)

// maxNesting bounds brackets in a header; numpy headers use depth 2.
const maxNesting = 16

// headerParser is a strict parser for the Python dict literal of an npy
// header. Positions in its messages are byte offsets into the header text.
// python/memtier/_index.py implements the same grammar with the same messages.
type headerParser struct {
	b   []byte
	pos int
}

func isHeaderSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *headerParser) skipSpace() {
	for p.pos < len(p.b) && isHeaderSpace(p.b[p.pos]) {
		p.pos++
	}
}

func (p *headerParser) unexpected() error {
	if p.pos >= len(p.b) {
		return formatErr("npy header: unexpected end of header at byte %d", p.pos)
	}
	return formatErr("npy header: unexpected %s at byte %d", quote(p.b[p.pos:p.pos+1]), p.pos)
}

func (p *headerParser) value(depth int) (any, error) {
	if p.pos >= len(p.b) {
		return nil, p.unexpected()
	}
	c := p.b[p.pos]
	switch {
	case c == '{' || c == '(' || c == '[':
		if depth >= maxNesting {
			return nil, formatErr("npy header: nesting deeper than %d at byte %d", maxNesting, p.pos)
		}
		return p.container(depth + 1)
	case c == '\'' || c == '"':
		s, err := p.str()
		return s, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_':
		start := p.pos
		for p.pos < len(p.b) && isNameByte(p.b[p.pos]) {
			p.pos++
		}
		switch string(p.b[start:p.pos]) {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return pyNone{}, nil
		}
		return nil, formatErr("npy header: unknown name %s at byte %d", quote(p.b[start:p.pos]), start)
	}
	return nil, p.unexpected()
}

func isNameByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// str parses a quoted string without escapes.
func (p *headerParser) str() (string, error) {
	start := p.pos
	q := p.b[p.pos]
	p.pos++
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case q:
			p.pos++
			return string(p.b[start+1 : p.pos-1]), nil
		case '\\':
			return "", formatErr("npy header: escape in string at byte %d", p.pos)
		case '\n':
			return "", formatErr("npy header: unterminated string at byte %d", start)
		}
		p.pos++
	}
	return "", formatErr("npy header: unterminated string at byte %d", start)
}

// integer parses an optional '-' and decimal digits that fit in an int64.
func (p *headerParser) integer() (any, error) {
	start := p.pos
	if p.b[p.pos] == '-' {
		p.pos++
	}
	d := p.pos
	for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == d {
		return nil, p.unexpected()
	}
	v, err := strconv.ParseInt(string(p.b[start:p.pos]), 10, 64)
	if err != nil {
		return nil, formatErr("npy header: integer at byte %d does not fit in int64", start)
	}
	return v, nil
}

// container parses a dict, tuple or list; p.pos is on its opening bracket.
func (p *headerParser) container(depth int) (any, error) {
	open := p.b[p.pos]
	closer := map[byte]byte{'{': '}', '(': ')', '[': ']'}[open]
	p.pos++
	var items []any
	dict := &pyDict{vals: map[string]any{}}
	comma := false
	p.skipSpace()
	for {
		if p.pos < len(p.b) && p.b[p.pos] == closer {
			p.pos++
			break
		}
		keyPos := p.pos
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if open == '{' {
			key, ok := v.(string)
			if !ok {
				return nil, formatErr("npy header: dict key at byte %d is not a string", keyPos)
			}
			if _, dup := dict.vals[key]; dup {
				return nil, formatErr("npy header: duplicate key %s at byte %d", quote([]byte(key)), keyPos)
			}
			if p.pos >= len(p.b) || p.b[p.pos] != ':' {
				return nil, p.unexpected()
			}
			p.pos++
			p.skipSpace()
			if v, err = p.value(depth); err != nil {
				return nil, err
			}
			p.skipSpace()
			dict.keys = append(dict.keys, key)
			dict.vals[key] = v
		} else {
			items = append(items, v)
		}
		if p.pos < len(p.b) && p.b[p.pos] == ',' {
			comma = true
			p.pos++
			p.skipSpace()
			continue
		}
		if p.pos < len(p.b) && p.b[p.pos] == closer {
			p.pos++
			break
		}
		return nil, p.unexpected()
	}
	switch open {
	case '{':
		return dict, nil
	case '[':
		return pyList(items), nil
	}
	if len(items) == 1 && !comma {
		return items[0], nil // "(x)" is x, as in Python
	}
	return pyTuple(items), nil
}

// formatShape writes a tuple of ints the way Python's repr does: "(3,)", "(3, 2)".
func formatShape(t pyTuple) string {
	parts := make([]string, len(t))
	for i, v := range t {
		parts[i] = strconv.FormatInt(v.(int64), 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// npyLayout is what the header says about the array.
type npyLayout struct {
	itemSize int // 4 or 8
	signed   bool
	rows     int64
}

// checkHeader validates the parsed header dict.
func checkHeader(v any) (npyLayout, error) {
	d, ok := v.(*pyDict)
	if !ok {
		return npyLayout{}, formatErr("npy header: not a dict literal")
	}
	if len(d.keys) != 3 || d.vals["descr"] == nil || d.vals["fortran_order"] == nil || d.vals["shape"] == nil {
		qs := make([]string, len(d.keys))
		for i, k := range d.keys {
			qs[i] = quote([]byte(k))
		}
		return npyLayout{}, formatErr("npy header: keys must be descr, fortran_order, shape; got [%s]", strings.Join(qs, ", "))
	}
	var lay npyLayout
	descr, ok := d.vals["descr"].(string)
	if !ok {
		return lay, formatErr("npy dtype is not a type string (structured dtypes are not supported)")
	}
	switch descr {
	case "<i8":
		lay.itemSize, lay.signed = 8, true
	case "<u8":
		lay.itemSize = 8
	case "<i4":
		lay.itemSize, lay.signed = 4, true
	case "<u4":
		lay.itemSize = 4
	default:
		if strings.HasPrefix(descr, ">") {
			return lay, formatErr("npy dtype %s is big-endian; want <i8, <u8, <i4 or <u4", quote([]byte(descr)))
		}
		return lay, formatErr("npy dtype %s is not supported; want <i8, <u8, <i4 or <u4", quote([]byte(descr)))
	}
	fortran, ok := d.vals["fortran_order"].(bool)
	if !ok {
		return lay, formatErr("npy header: fortran_order is not True or False")
	}
	if fortran {
		return lay, formatErr("npy array is in Fortran order; want C order (fortran_order False)")
	}
	shape, ok := d.vals["shape"].(pyTuple)
	if ok {
		for _, dim := range shape {
			if n, isInt := dim.(int64); !isInt || n < 0 {
				ok = false
			}
		}
	}
	if !ok {
		return lay, formatErr("npy shape is not a tuple of non-negative integers")
	}
	if len(shape) != 2 || shape[1].(int64) != 2 {
		return lay, formatErr("npy shape %s is not (N, 2)", formatShape(shape))
	}
	lay.rows = shape[0].(int64)
	return lay, nil
}

// parseNpy parses an index whose first 6 bytes are the npy magic.
func parseNpy(r io.ReaderAt, size, dataSize int64) ([]Record, error) {
	tooShort := formatErr("npy header: file too short for the npy preamble (%d bytes)", size)
	if size < 8 {
		return nil, tooShort
	}
	pre := make([]byte, min(size, 12))
	if err := readFull(r, pre, 0); err != nil {
		return nil, err
	}
	major, minor := pre[6], pre[7]
	if major < 1 || major > 3 || minor != 0 {
		return nil, formatErr("npy header: unsupported format version %d.%d", major, minor)
	}
	var hlen, start int64
	if major == 1 {
		if size < 10 {
			return nil, tooShort
		}
		hlen, start = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	} else {
		if size < 12 {
			return nil, tooShort
		}
		hlen, start = int64(binary.LittleEndian.Uint32(pre[8:12])), 12
	}
	if hlen > maxHeaderBytes {
		return nil, formatErr("npy header: %d bytes exceeds the 1 MiB limit", hlen)
	}
	if start+hlen > size {
		return nil, formatErr("npy header: truncated (%d header bytes declared, %d present)", hlen, size-start)
	}
	hdr := make([]byte, hlen)
	if err := readFull(r, hdr, start); err != nil {
		return nil, err
	}
	p := &headerParser{b: hdr}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(hdr) {
		return nil, p.unexpected()
	}
	lay, err := checkHeader(v)
	if err != nil {
		return nil, err
	}
	return readRows(r, lay, start+hlen, size, dataSize)
}

// readRows checks the body size against the shape, then decodes and validates
// the rows in 1 MiB chunks.
func readRows(r io.ReaderAt, lay npyLayout, bodyStart, size, dataSize int64) ([]Record, error) {
	rowBytes := int64(2 * lay.itemSize)
	body := size - bodyStart
	if have := body / rowBytes; lay.rows > have {
		return nil, formatErr("npy body truncated: %d rows declared, %d bytes present, row %d is incomplete",
			lay.rows, body, have)
	}
	if extra := body - lay.rows*rowBytes; extra > 0 {
		return nil, formatErr("npy body has %d bytes of trailing data after %d rows", extra, lay.rows)
	}
	recs := make([]Record, lay.rows)
	const chunkRows = (1 << 20) / 16
	buf := make([]byte, min(lay.rows, chunkRows)*rowBytes)
	for first := int64(0); first < lay.rows; first += chunkRows {
		n := min(lay.rows-first, chunkRows)
		chunk := buf[:n*rowBytes]
		if err := readFull(r, chunk, bodyStart+first*rowBytes); err != nil {
			return nil, err
		}
		for i := int64(0); i < n; i++ {
			row := first + i
			var vals [2]int64
			for col := 0; col < 2; col++ {
				b := chunk[i*rowBytes+int64(col*lay.itemSize):]
				v, err := decodeValue(b, lay, row, col)
				if err != nil {
					return nil, err
				}
				vals[col] = v
			}
			if err := checkRecord("row "+strconv.FormatInt(row, 10), vals[0], vals[1], dataSize); err != nil {
				return nil, err
			}
			recs[row] = Record{Offset: vals[0], Length: vals[1]}
		}
	}
	return recs, nil
}

var colNames = [2]string{"offset", "length"}

// decodeValue decodes one little-endian cell and checks it is in [0, MaxInt64].
func decodeValue(b []byte, lay npyLayout, row int64, col int) (int64, error) {
	var v int64
	switch {
	case lay.itemSize == 8 && lay.signed:
		v = int64(binary.LittleEndian.Uint64(b))
	case lay.itemSize == 8:
		u := binary.LittleEndian.Uint64(b)
		if u > math.MaxInt64 {
			return 0, formatErr("row %d: %s %d overflows int64", row, colNames[col], u)
		}
		v = int64(u)
	case lay.signed:
		v = int64(int32(binary.LittleEndian.Uint32(b)))
	default:
		v = int64(binary.LittleEndian.Uint32(b))
	}
	if v < 0 {
		return 0, formatErr("row %d: %s %d is negative", row, colNames[col], v)
	}
	return v, nil
}
