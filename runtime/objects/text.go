package objects

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/memtier/memtier/runtime/errs"
)

// parseText parses the text encoding (package doc) from r, one line at a time.
func parseText(r io.Reader, dataSize int64) ([]Record, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var recs []Record
	var long []byte // a line longer than the bufio buffer, accumulated
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return nil, errs.FromErrno("read", "", -1, err)
		}
		if len(line) == 0 && err == io.EOF {
			return recs, nil
		}
		rec, ok, perr := parseLine(line, lineNo, dataSize)
		if perr != nil {
			return nil, perr
		}
		if ok {
			recs = append(recs, rec)
		}
		if err == io.EOF {
			return recs, nil
		}
	}
}

// isBlank reports whether c separates fields: a space or a tab.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// trimBlanks drops leading and trailing spaces and tabs (bytes, not runes).
func trimBlanks(b []byte) []byte {
	for len(b) > 0 && isBlank(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isBlank(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// splitBlanks splits b, which has no leading or trailing blank, at runs of
// spaces and tabs.
func splitBlanks(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || isBlank(b[i]) {
			if i > start {
				out = append(out, b[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// parseLine parses one physical line (with its "\n", if any). ok is false for
// a blank or comment line.
func parseLine(line []byte, lineNo int, dataSize int64) (Record, bool, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	line = trimBlanks(line)
	if len(line) == 0 || line[0] == '#' {
		return Record{}, false, nil
	}
	fields := splitBlanks(line)
	if len(fields) != 2 {
		return Record{}, false, formatErr("line %d: expected 2 fields (offset length), got %d", lineNo, len(fields))
	}
	where := "line " + strconv.Itoa(lineNo)
	off, err := parseDecimal(where, "offset", fields[0])
	if err != nil {
		return Record{}, false, err
	}
	length, err := parseDecimal(where, "length", fields[1])
	if err != nil {
		return Record{}, false, err
	}
	if err := checkRecord(where, off, length, dataSize); err != nil {
		return Record{}, false, err
	}
	return Record{Offset: off, Length: length}, true, nil
}

// parseDecimal parses an optional sign and ASCII digits into a value in
// [0, MaxInt64]. "-0" is 0.
func parseDecimal(where, name string, tok []byte) (int64, error) {
	digits := tok
	neg := false
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		neg = digits[0] == '-'
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, formatErr("%s: %s %s is not a decimal integer", where, name, quote(tok))
	}
	zero := true
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, formatErr("%s: %s %s is not a decimal integer", where, name, quote(tok))
		}
		if c != '0' {
			zero = false
		}
	}
	if neg && !zero {
		return 0, formatErr("%s: %s %s is negative", where, name, quote(tok))
	}
	v, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil {
		return 0, formatErr("%s: %s %s overflows int64", where, name, quote(tok))
	}
	return v, nil
}
