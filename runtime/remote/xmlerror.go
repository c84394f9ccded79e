package remote

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error response is read (S3 error
// documents are under 2 KiB, but a SignatureDoesNotMatch echoes the
// canonical request, and a misconfigured proxy may answer with a page).
const maxErrorBody = 64 << 10

// maxErrorText bounds the Code and Message kept for a message.
const maxErrorText = 256

// parseXMLError extracts the Code and Message elements of an S3 error
// document (<Error><Code>NoSuchKey</Code><Message>...</Message>...</Error>),
// decoding XML entities and CDATA. It takes the first occurrence of each
// element anywhere in body, so a wrapped or namespaced document still
// yields them; a body that is not XML gives "", "". The results are
// printable (control characters become spaces) and at most 256 bytes.
//
// A hand-written scanner instead of encoding/xml: it needs only two
// elements, never fails on a truncated body, and keeps encoding/xml out of
// the shared library.
func parseXMLError(body []byte) (code, message string) {
	return xmlElement(body, "Code"), xmlElement(body, "Message")
}

// xmlElement returns the decoded text of the first <name>...</name> in body.
func xmlElement(body []byte, name string) string {
	s := string(body)
	open := "<" + name + ">"
	i := strings.Index(s, open)
	if i < 0 {
		return ""
	}
	s = s[i+len(open):]
	j := strings.Index(s, "</"+name+">")
	if j < 0 {
		return ""
	}
	return clean(xmlText(s[:j]))
}

// xmlText decodes character data: CDATA sections verbatim, the five
// predefined entities, and decimal/hex character references. An unknown or
// malformed entity is kept as written.
func xmlText(s string) string {
	if !strings.ContainsAny(s, "&<") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, "<![CDATA["):
			rest := s[len("<![CDATA["):]
			end := strings.Index(rest, "]]>")
			if end < 0 {
				b.WriteString(rest)
				return b.String()
			}
			b.WriteString(rest[:end])
			s = rest[end+3:]
		case s[0] == '&':
			end := strings.IndexByte(s, ';')
			if end < 0 || end > 12 {
				b.WriteByte('&')
				s = s[1:]
				continue
			}
			if r, ok := entity(s[1:end]); ok {
				b.WriteRune(r)
			} else {
				b.WriteString(s[:end+1])
			}
			s = s[end+1:]
		default:
			next := strings.IndexAny(s[1:], "&<")
			if next < 0 {
				b.WriteString(s)
				return b.String()
			}
			b.WriteString(s[:next+1])
			s = s[next+1:]
		}
	}
	return b.String()
}

// entity decodes the name of an entity or character reference (without
// '&' and ';').
func entity(name string) (rune, bool) {
	switch name {
	case "amp":
		return '&', true
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "quot":
		return '"', true
	case "apos":
		return '\'', true
	}
	if len(name) < 2 || name[0] != '#' {
		return 0, false
	}
	base, digits := 10, name[1:]
	if digits[0] == 'x' || digits[0] == 'X' {
		base, digits = 16, digits[1:]
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil || n > utf8.MaxRune || !utf8.ValidRune(rune(n)) {
		return 0, false
	}
	return rune(n), true
}

// clean makes server text safe for a one-line message: invalid UTF-8 and
// control characters become spaces, runs of spaces collapse, and it is cut
// to maxErrorText bytes on a rune boundary.
func clean(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f {
			r = ' '
		}
		if r == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		if b.Len()+utf8.RuneLen(r) > maxErrorText {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
