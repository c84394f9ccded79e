package remote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseContentRange: never panics; what it accepts is consistent
// (first <= last < size when known) and survives a round trip through
// String.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes */0", "bytes 1-2/*", "BYTES 00-01/2", "bytes 5-4/10", "bytes 18446744073709551615-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		cr, ok := parseContentRange(h)
		if !ok {
			return
		}
		if !cr.unsatisfied && (cr.first > cr.last || (cr.sizeKnown && cr.last >= cr.size)) {
			t.Fatalf("%q accepted as inconsistent %+v", h, cr)
		}
		again, ok := parseContentRange(cr.String())
		if !ok || again != cr {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", h, cr, cr.String(), again, ok)
		}
	})
}

// FuzzParseXMLError: never panics, and the text it returns is bounded,
// valid UTF-8 without control characters; a Code written plainly comes
// back exactly.
func FuzzParseXMLError(f *testing.F) {
	for _, s := range []string{
		"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>",
		"<Code>&#x41;&#65;&amp;</Code>", "<Message><![CDATA[x]]></Message>", "<Code>&#xD800;</Code>", "<Message>\xff\x00</Message>",
	} {
		f.Add([]byte(s), "SlowDown")
	}
	f.Fuzz(func(t *testing.T, body []byte, plain string) {
		code, msg := parseXMLError(body)
		for _, s := range []string{code, msg} {
			if len(s) > maxErrorText || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("unsafe text %q from %q", s, body)
			}
		}
		ok := len(plain) > 0 && len(plain) <= 64
		for _, r := range plain {
			ok = ok && (r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
		}
		if ok {
			if c, _ := parseXMLError([]byte("<Error><Code>" + plain + "</Code></Error>")); c != plain {
				t.Fatalf("code %q came back %q", plain, c)
			}
		}
	})
}
