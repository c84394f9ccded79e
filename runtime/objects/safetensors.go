package objects

// Safetensors header parser.
//
// # File format
//
// A safetensors file (the format published by Hugging Face's safetensors
// project) is:
//
//	[8 bytes]  N, the header length, a little-endian unsigned 64-bit integer
//	[N bytes]  the header: UTF-8 JSON, starting with '{', optionally padded
//	           with trailing white space (writers pad with spaces to 8 bytes)
//	[rest]     the data section: the tensors' bytes, back to back
//
// The header is a JSON object. Each key is a tensor name whose value is
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// with begin and end relative to the first byte of the data section. The
// optional key "__metadata__" maps to an object of string -> string (JSON null
// is read as no metadata, as the reference implementation does). Unknown
// fields inside a tensor entry are skipped, as the reference does.
//
// # Validation
//
// ParseSafetensors checks the whole header before returning anything, and
// reports the first problem as an *errs.Error with code errs.Format. Each
// message starts with the kind of problem (the phrases below are stable, tests
// and other layers may match them) and names the tensor or the byte offset in
// the file:
//
//   - "header too small": the file is shorter than 8 bytes;
//   - "header too large": N is over SafetensorsLimits.MaxHeaderBytes (the
//     message states the limit); decided before any N-byte allocation;
//   - "invalid header length": N is past the end of the file;
//   - "invalid header encoding": the header is not valid UTF-8;
//   - "invalid header start": the header's first byte after JSON white space
//     is not '{' (an empty or all-white-space header is refused too; white
//     space before the '{' is accepted, as the reference 0.8 accepts it);
//   - "invalid JSON": a syntax error, or anything but white space after the
//     top-level object;
//   - "invalid entry": a tensor entry that is not an object, a missing field or
//     a field of the wrong JSON type;
//   - "duplicate": the same tensor name, metadata key, "__metadata__" or tensor
//     field twice (caught while parsing, names compared after unescaping);
//   - "invalid metadata": "__metadata__" that is not an object of strings;
//   - "invalid offsets": data_offsets that is not two non-negative integers, or
//     begin > end;
//   - "range past end": end is past the end of the data section;
//   - "unknown dtype": a dtype that is not one of the 22 of the spec (the
//     packed sub-byte F4, F6_E2M3 and F6_E3M2 are among them);
//   - "invalid shape": a dimension that is not an integer, or is negative;
//   - "shape overflow": a dimension, the element count or the byte size does
//     not fit in an int64 (multiplications are checked);
//   - "size mismatch": element count x element bits is not a whole number of
//     bytes (the packed sub-byte dtypes F4, F6_E2M3, F6_E3M2), or its bytes
//     != end - begin;
//   - "overlapping tensors", "gap between tensors": sorted by begin (then end),
//     each tensor must start where the previous one ended, the first at 0;
//   - "file length mismatch": the last tensor must end exactly at the end of
//     the data section, i.e. the file length equals 8 + N + data.
//
// Zero-element tensors (begin == end) and headers with no tensors ("{}" or
// only "__metadata__") are valid.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memtier/memtier/runtime/errs"
)

// DefaultMaxSafetensorsHeader is the header size limit used when
// SafetensorsLimits.MaxHeaderBytes is 0; it is the reference library's limit.
const DefaultMaxSafetensorsHeader = 100_000_000

// safetensorsMetadataKey is the reserved header key for string metadata.
const safetensorsMetadataKey = "__metadata__"

// Tensor is one tensor of a safetensors file.
type Tensor struct {
	Name     string
	DType    string  // the dtype string of the header, e.g. "BF16"
	Shape    []int64 // every dimension >= 0; empty for a scalar
	Begin    int64   // absolute file offset of the first byte
	End      int64   // absolute file offset one past the last byte
	ElemBits int     // bits per element: 4 or 6 (packed F4, F6_*), 8, 16, 32 or 64
}

// Safetensors is a parsed and validated safetensors header.
type Safetensors struct {
	Tensors   []Tensor          // in data order (by Begin, then End, then header order)
	Metadata  map[string]string // nil when the header has no "__metadata__" (or it is null); empty for {}
	HeaderLen int64             // N, the JSON header length (padding included)
	DataStart int64             // 8 + N, absolute offset of the data section
	FileSize  int64             // DataStart + data section size

	index map[string]int // name -> position in Tensors
}

// Index returns the position of the tensor called name in s.Tensors, or -1.
func (s *Safetensors) Index(name string) int {
	if s == nil {
		return -1
	}
	if s.index != nil {
		if i, ok := s.index[name]; ok {
			return i
		}
		return -1
	}
	for i := range s.Tensors {
		if s.Tensors[i].Name == name {
			return i
		}
	}
	return -1
}

// SafetensorsLimits bounds what ParseSafetensors accepts.
type SafetensorsLimits struct {
	// MaxHeaderBytes caps the JSON header length N; 0 means
	// DefaultMaxSafetensorsHeader (100,000,000 bytes). The reference
	// library's cap rejects some legitimate files with over a million tensors,
	// so callers may raise it; the header is read into memory whole.
	MaxHeaderBytes int64
}

// safetensorsDTypes maps each dtype of the current safetensors spec (22) to
// its size in bits per element.
var safetensorsDTypes = map[string]int{
	"BOOL":        8,
	"F4":          4, // float4 e2m1 (MX), sub-byte
	"F6_E2M3":     6, // float6 (MX), sub-byte
	"F6_E3M2":     6, // float6 (MX), sub-byte
	"U8":          8,
	"I8":          8,
	"F8_E5M2":     8,
	"F8_E4M3":     8,
	"F8_E8M0":     8,
	"F8_E4M3FNUZ": 8,
	"F8_E5M2FNUZ": 8,
	"I16":         16,
	"U16":         16,
	"F16":         16,
	"BF16":        16,
	"I32":         32,
	"U32":         32,
	"F32":         32,
	"C64":         64, // complex: two float32
	"F64":         64,
	"I64":         64,
	"U64":         64,
}

// SafetensorsDTypeBits returns the element size in bits of a safetensors
// dtype string, and whether the spec knows it: 4 for F4 and 6 for F6_E2M3 and
// F6_E3M2 (packed: a tensor's payload is elements x bits / 8 bytes).
func SafetensorsDTypeBits(dtype string) (bits int, ok bool) {
	bits, ok = safetensorsDTypes[dtype]
	return bits, ok
}

// ParseSafetensors reads and validates the header of the safetensors file held
// in r[0:fileSize) (format and rules in the comment at the top of this file).
// It reads the 8-byte length and the header only, never the data section. A
// bad file gives an *errs.Error with code errs.Format; bad arguments give
// errs.InvalidArg; a failing r.ReadAt gives its error mapped by
// errs.FromErrno. The result is owned by the caller.
func ParseSafetensors(r io.ReaderAt, fileSize int64, lim SafetensorsLimits) (*Safetensors, error) {
	if fileSize < 0 {
		return nil, errs.New(errs.InvalidArg, "safetensors", "negative file size %d", fileSize)
	}
	limit := lim.MaxHeaderBytes
	if limit < 0 {
		return nil, errs.New(errs.InvalidArg, "safetensors", "negative header limit %d", limit)
	}
	if limit == 0 {
		limit = DefaultMaxSafetensorsHeader
	}
	if fileSize < 8 {
		return nil, stErr(-1, "header too small: the file is %d bytes, shorter than the 8-byte header length", fileSize)
	}
	var lenBuf [8]byte
	if err := readFull(r, lenBuf[:], 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	// A file that starts with '{' is JSON, most often a sharded checkpoint's
	// model.safetensors.index.json passed where a shard was expected: its
	// first 8 bytes read as an absurd length, so say what it is.
	jsonHint := ""
	if lenBuf[0] == '{' {
		jsonHint = "; the file starts with '{', so it is JSON, not safetensors (a sharded checkpoint's " +
			"*.safetensors.index.json? memtier.safetensors.load_model and load_into follow its weight_map)"
	}
	if n > uint64(limit) {
		return nil, stErr(0, "header too large: header length %d is over the limit of %d bytes%s", n, limit, jsonHint)
	}
	if n > uint64(fileSize-8) {
		return nil, stErr(0, "invalid header length: header length %d is past the end of the file (%d bytes follow the 8-byte length)%s",
			n, fileSize-8, jsonHint)
	}
	// n <= limit and n <= fileSize-8: the allocation is bounded by both.
	header := make([]byte, n)
	if err := readFull(r, header, 8); err != nil {
		return nil, err
	}
	// As the reference: UTF-8 first, then the '{'.
	if !utf8.Valid(header) {
		i := 0
		for i < len(header) {
			c, size := utf8.DecodeRune(header[i:])
			if c == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return nil, stErr(8+int64(i), "invalid header encoding: the header is not valid UTF-8 (byte 0x%02x)", header[i])
	}
	// JSON white space may precede the object: the reference (safetensors
	// 0.8, serde_json) reads " {...}"; a byte-order mark is not white space.
	j := 0
	for j < len(header) && (header[j] == ' ' || header[j] == '\t' || header[j] == '\n' || header[j] == '\r') {
		j++
	}
	if j == len(header) || header[j] != '{' {
		found := "an empty header"
		switch {
		case j < len(header):
			found = quote(header[j:min(len(header), j+8)])
		case n > 0:
			found = "only white space"
		}
		return nil, stErr(8+int64(j), "invalid header start: the header must start with '{' (after JSON white space), found %s", found)
	}
	st := &Safetensors{
		HeaderLen: int64(n),
		DataStart: 8 + int64(n),
		FileSize:  fileSize,
	}
	p := stParser{dec: json.NewDecoder(bytes.NewReader(header)), hdr: header, dataLen: fileSize - 8 - int64(n)}
	p.dec.UseNumber()
	if err := p.parse(st); err != nil {
		return nil, err
	}
	return st, nil
}

// ParseSafetensorsFile opens path and parses it with ParseSafetensors. Errors
// carry the path: an open failure keeps its errno-derived code (NotFound,
// Permission, IsDir...), a bad file is errs.Format.
func ParseSafetensorsFile(path string, lim SafetensorsLimits) (*Safetensors, error) {
	return parseFile(path, "safetensors", func(r io.ReaderAt, size int64) (*Safetensors, error) {
		return ParseSafetensors(r, size, lim)
	})
}

// stErr builds a Format error about the byte at file offset off (< 0: none).
func stErr(off int64, format string, args ...any) error {
	return errs.At(errs.Format, "safetensors", "", off, format, args...)
}

// stName renders a tensor name or metadata key for a message: Go-quoted with
// non-ASCII escaped, cut at 200 bytes.
func stName(s string) string {
	if len(s) > 200 {
		return strconv.QuoteToASCII(s[:200]) + "..."
	}
	return strconv.QuoteToASCII(s)
}

// stEntry is a tensor entry as read, before validation; offsets are relative
// to the data section, ord is its position in the header.
type stEntry struct {
	name       string
	dtype      string
	shape      []int64
	begin, end int64
	ord        int
}

// stParser walks the header's JSON tokens. Token positions in messages are
// file offsets (header offset + 8).
type stParser struct {
	dec     *json.Decoder
	hdr     []byte // the header, for token positions
	dataLen int64
	tokAt   int64 // file offset of the first byte of the last token read
}

// next is the file offset of the next token: the decoder's position past
// white space and the ',' or ':' it consumes silently.
func (p *stParser) next() int64 {
	i := p.dec.InputOffset()
	for i < int64(len(p.hdr)) && strings.IndexByte(" \t\r\n,:", p.hdr[i]) >= 0 {
		i++
	}
	return 8 + i
}

// token reads the next JSON token, turning decoder errors into Format errors.
func (p *stParser) token() (json.Token, error) {
	at := p.next()
	p.tokAt = at
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.jsonErr(err, at)
	}
	return tok, nil
}

// jsonErr reports a decoder error met at file offset at. The decoder's own
// offsets are not file positions in token mode, so the header is checked again
// from the start (only on this error path) to find the first bad byte.
func (p *stParser) jsonErr(err error, at int64) error {
	var v struct{}
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(p.hdr, &v), &se) {
		if se.Offset >= int64(len(p.hdr)) && strings.HasPrefix(se.Error(), "unexpected end") {
			return stErr(8+int64(len(p.hdr)), "invalid JSON: unexpected end of the header")
		}
		return stErr(8+max(se.Offset-1, 0), "invalid JSON: %v", se)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return stErr(8+int64(len(p.hdr)), "invalid JSON: unexpected end of the header")
	}
	return stErr(at, "invalid JSON: %v", err)
}

// stDescribe names a token's JSON type for messages.
func stDescribe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return "'" + string(v) + "'"
	case string:
		return "a string"
	case json.Number:
		return "a number (" + string(v) + ")"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// key reads an object key or the closing '}'; done reports the latter.
func (p *stParser) key() (k string, done bool, err error) {
	tok, err := p.token()
	if err != nil {
		return "", false, err
	}
	if tok == json.Delim('}') {
		return "", true, nil
	}
	s, ok := tok.(string)
	if !ok { // the decoder only returns strings as keys; be safe anyway
		return "", false, stErr(p.tokAt, "invalid JSON: object key is %s", stDescribe(tok))
	}
	return s, false, nil
}

// stMaxDepth caps JSON nesting, counting the top-level object, as the
// reference parser (serde_json) does.
const stMaxDepth = 128

// skip consumes the value of an unknown field of a tensor entry, whose first
// token is tok; the value sits at depth 3 (top object, entry, value).
func (p *stParser) skip(tok json.Token) error {
	depth := 0
	for {
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				if depth+2 > stMaxDepth {
					return stErr(p.tokAt, "invalid JSON: nesting deeper than %d levels", stMaxDepth)
				}
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
		var err error
		if tok, err = p.token(); err != nil {
			return err
		}
	}
}

// intArray reads the value of field, a JSON array of integers that fit in
// int64. The decoder checks the whole value is valid JSON and copies it once;
// the integers are then read from that copy without further garbage.
func (p *stParser) intArray(where, field string) ([]int64, error) {
	kind, overflow, elem := "invalid shape", "shape overflow", "dimension"
	if field == "data_offsets" {
		kind, overflow, elem = "invalid offsets", "invalid offsets", "data_offsets entry"
	}
	at := p.next()
	p.tokAt = at
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return nil, p.jsonErr(err, at)
	}
	i := 0
	skipSpace := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	skipSpace()
	if i >= len(raw) || raw[i] != '[' {
		what := "invalid entry"
		if field == "data_offsets" {
			what = kind
		}
		return nil, stErr(at, "%s: %s: %s is %s, not an array of integers", what, where, field, stJSONKind(raw[i:]))
	}
	i++
	// One slot per comma: exact for an array of numbers, and anything else is
	// refused below.
	out := make([]int64, 0, 1+bytes.Count(raw, []byte{','}))
	for {
		skipSpace()
		if i < len(raw) && raw[i] == ']' {
			return out, nil
		}
		if len(out) > 0 && i < len(raw) && raw[i] == ',' {
			i++
			skipSpace()
		}
		start := i
		for i < len(raw) && (raw[i] == '-' || raw[i] == '+' || raw[i] == '.' || raw[i] == 'e' || raw[i] == 'E' ||
			(raw[i] >= '0' && raw[i] <= '9')) {
			i++
		}
		num := raw[start:i]
		if len(num) == 0 {
			return nil, stErr(at, "%s: %s: %s %d is %s, not an integer", kind, where, elem, len(out), stJSONKind(raw[i:]))
		}
		if bytes.ContainsAny(num, ".eE") {
			return nil, stErr(at, "%s: %s: %s %d (%s) is not an integer", kind, where, elem, len(out), num)
		}
		v, ok := stParseInt(num)
		if !ok {
			return nil, stErr(at, "%s: %s: %s %d (%s) does not fit in int64", overflow, where, elem, len(out), num)
		}
		out = append(out, v)
	}
}

// stJSONKind names the JSON type of the value starting b (valid JSON).
func stJSONKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// stParseInt parses a JSON integer (an optional '-' and decimal digits, as
// checked by the decoder); ok is false when it does not fit in int64.
func stParseInt(b []byte) (v int64, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var u uint64
	for _, c := range b {
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// parse reads the top-level object, validates every entry and the tiling of
// the data section, and fills st.
func (p *stParser) parse(st *Safetensors) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') { // unreachable: the first byte is '{'
		return stErr(8, "invalid header start: the header is %s, not an object", stDescribe(tok))
	}
	var entries []stEntry
	seen := map[string]int{}
	haveMeta := false
	for {
		name, done, err := p.key()
		if err != nil {
			return err
		}
		if done {
			break
		}
		at := p.tokAt
		if name == safetensorsMetadataKey {
			if haveMeta {
				return stErr(at, "duplicate: the header has a second %q", safetensorsMetadataKey)
			}
			haveMeta = true
			if st.Metadata, err = p.metadata(); err != nil {
				return err
			}
			continue
		}
		if _, dup := seen[name]; dup {
			return stErr(at, "duplicate: tensor %s appears twice in the header", stName(name))
		}
		seen[name] = len(entries)
		e, err := p.entry(name)
		if err != nil {
			return err
		}
		e.ord = len(entries)
		if err := p.check(&e); err != nil {
			return err
		}
		entries = append(entries, e)
	}
	// Nothing but white space may follow the object.
	p.tokAt = p.next()
	if tok, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return p.jsonErr(err, p.tokAt)
		}
		return stErr(p.tokAt, "invalid JSON: %s after the header object", stDescribe(tok))
	}
	return p.tile(st, entries, seen)
}

// metadata reads the value of "__metadata__": an object of strings, or null.
func (p *stParser) metadata() (map[string]string, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, stErr(p.tokAt, "invalid metadata: %q is %s, not an object of strings",
			safetensorsMetadataKey, stDescribe(tok))
	}
	m := map[string]string{}
	for {
		k, done, err := p.key()
		if err != nil {
			return nil, err
		}
		if done {
			return m, nil
		}
		at := p.tokAt
		if _, dup := m[k]; dup {
			return nil, stErr(at, "duplicate: metadata key %s appears twice", stName(k))
		}
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, stErr(p.tokAt, "invalid metadata: the value of metadata key %s is %s, not a string",
				stName(k), stDescribe(tok))
		}
		m[k] = v
	}
}

// entry reads one tensor entry: its fields, types and integer syntax. Range,
// dtype and size checks are left to check.
func (p *stParser) entry(name string) (stEntry, error) {
	e := stEntry{name: name}
	where := "tensor " + stName(name)
	tok, err := p.token()
	if err != nil {
		return e, err
	}
	if tok != json.Delim('{') {
		return e, stErr(p.tokAt, "invalid entry: %s is %s, not an object with dtype, shape and data_offsets",
			where, stDescribe(tok))
	}
	entryAt := p.tokAt
	var haveDType, haveShape, haveOffsets bool
	for {
		field, done, err := p.key()
		if err != nil {
			return e, err
		}
		if done {
			break
		}
		at := p.tokAt
		var dup bool
		switch field {
		case "dtype":
			dup, haveDType = haveDType, true
		case "shape":
			dup, haveShape = haveShape, true
		case "data_offsets":
			dup, haveOffsets = haveOffsets, true
		}
		if dup {
			return e, stErr(at, "duplicate: %s has field %q twice", where, field)
		}
		switch field {
		case "shape":
			if e.shape, err = p.intArray(where, field); err != nil {
				return e, err
			}
			continue
		case "data_offsets":
			offs, err := p.intArray(where, field)
			if err != nil {
				return e, err
			}
			if len(offs) != 2 {
				return e, stErr(p.tokAt, "invalid offsets: %s: data_offsets has %d entries, want 2 [begin, end]",
					where, len(offs))
			}
			for i, v := range offs {
				if v < 0 {
					return e, stErr(p.tokAt, "invalid offsets: %s: data_offsets entry %d (%d) is negative", where, i, v)
				}
			}
			e.begin, e.end = offs[0], offs[1]
			continue
		}
		tok, err := p.token()
		if err != nil {
			return e, err
		}
		switch field {
		case "dtype":
			s, ok := tok.(string)
			if !ok {
				return e, stErr(p.tokAt, "invalid entry: %s: dtype is %s, not a string", where, stDescribe(tok))
			}
			e.dtype = s
		default:
			if err := p.skip(tok); err != nil {
				return e, err
			}
		}
	}
	for _, f := range []struct {
		have bool
		name string
	}{{haveDType, "dtype"}, {haveShape, "shape"}, {haveOffsets, "data_offsets"}} {
		if !f.have {
			return e, stErr(entryAt, "invalid entry: %s has no %s", where, f.name)
		}
	}
	return e, nil
}

// check validates one entry on its own: offsets, then dtype, then shape and
// size, so a bad range is reported even with an unknown dtype.
func (p *stParser) check(e *stEntry) error {
	where := "tensor " + stName(e.name)
	if e.begin > e.end {
		return stErr(-1, "invalid offsets: %s: data_offsets [%d, %d] begin is after end", where, e.begin, e.end)
	}
	if e.end > p.dataLen {
		return stErr(-1, "range past end: %s: data_offsets [%d, %d] end past the end of the data section (%d bytes)",
			where, e.begin, e.end, p.dataLen)
	}
	bits, ok := safetensorsDTypes[e.dtype]
	if !ok {
		return stErr(-1, "unknown dtype: %s: dtype %s is not a safetensors dtype", where, stName(e.dtype))
	}
	count := int64(1)
	for i, d := range e.shape {
		if d < 0 {
			return stErr(-1, "invalid shape: %s: dimension %d is negative (%d)", where, i, d)
		}
		if d != 0 && count > math.MaxInt64/d {
			return stErr(-1, "shape overflow: %s: the element count of shape %s overflows int64",
				where, stShape(e.shape))
		}
		count *= d
	}
	// Sizes are counted in bits so that the packed sub-byte dtypes (F4: two
	// values a byte; F6: four values in three bytes) follow the same rule as
	// the others, as safetensors 0.8 does: elements x bits must be a whole
	// number of bytes, equal to end - begin.
	if count > math.MaxInt64/int64(bits) {
		return stErr(-1, "shape overflow: %s: shape %s x %s (%d bits each) overflows int64",
			where, stShape(e.shape), e.dtype, bits)
	}
	nbits := count * int64(bits)
	if nbits%8 != 0 {
		return stErr(-1, "size mismatch: %s: shape %s x %s (%d bits each) is %d bits, not a whole number of bytes",
			where, stShape(e.shape), e.dtype, bits, nbits)
	}
	if size := nbits / 8; size != e.end-e.begin {
		return stErr(-1, "size mismatch: %s: shape %s x %s (%s each) is %d bytes, but data_offsets [%d, %d] hold %d bytes",
			where, stShape(e.shape), e.dtype, stElemSize(bits), size, e.begin, e.end, e.end-e.begin)
	}
	return nil
}

// tile sorts the entries by data order, checks they cover the data section
// exactly, and fills st.Tensors and the name index.
func (p *stParser) tile(st *Safetensors, entries []stEntry, seen map[string]int) error {
	slices.SortStableFunc(entries, func(a, b stEntry) int {
		if a.begin != b.begin {
			if a.begin < b.begin {
				return -1
			}
			return 1
		}
		if a.end != b.end {
			if a.end < b.end {
				return -1
			}
			return 1
		}
		return a.ord - b.ord
	})
	var at int64
	prev := -1
	for i := range entries {
		e := &entries[i]
		switch {
		case e.begin < at:
			return stErr(-1, "overlapping tensors: tensor %s data_offsets [%d, %d] overlaps tensor %s [%d, %d]",
				stName(e.name), e.begin, e.end, stName(entries[prev].name), entries[prev].begin, entries[prev].end)
		case e.begin > at && prev < 0:
			return stErr(-1, "gap between tensors: the data section starts with %d unused bytes: the first tensor %s has data_offsets [%d, %d]",
				e.begin, stName(e.name), e.begin, e.end)
		case e.begin > at:
			return stErr(-1, "gap between tensors: %d unused bytes between tensor %s (ends at %d) and tensor %s (begins at %d)",
				e.begin-at, stName(entries[prev].name), at, stName(e.name), e.begin)
		}
		at = e.end
		prev = i
	}
	if at != p.dataLen {
		return stErr(st.DataStart+at, "file length mismatch: the tensors end %d bytes into the data section but it has %d bytes: the file length %d must equal 8 + header %d + data %d",
			at, p.dataLen, st.FileSize, st.HeaderLen, at)
	}
	st.Tensors = make([]Tensor, len(entries))
	for i := range entries {
		e := &entries[i]
		st.Tensors[i] = Tensor{
			Name:     e.name,
			DType:    e.dtype,
			Shape:    e.shape,
			Begin:    st.DataStart + e.begin,
			End:      st.DataStart + e.end,
			ElemBits: safetensorsDTypes[e.dtype],
		}
		seen[e.name] = i
	}
	st.index = seen
	return nil
}

// stElemSize renders an element size for messages: "4 bytes", "4 bits".
func stElemSize(bits int) string {
	if bits%8 == 0 {
		return strconv.Itoa(bits/8) + " bytes"
	}
	return strconv.Itoa(bits) + " bits"
}

// stShape renders a shape as "[2, 3]".
func stShape(shape []int64) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(d, 10))
	}
	sb.WriteByte(']')
	return sb.String()
}
