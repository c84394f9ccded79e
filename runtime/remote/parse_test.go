package remote

import (
	"testing"
	"time"
)

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want contentRange
	}{
		{"bytes 0-9/10", true, contentRange{first: 0, last: 9, size: 10, sizeKnown: true}},
		{"Bytes 5-5/6", true, contentRange{first: 5, last: 5, size: 6, sizeKnown: true}},
		{" bytes 1-2/* ", true, contentRange{first: 1, last: 2}},
		{"bytes */0", true, contentRange{size: 0, sizeKnown: true, unsatisfied: true}},
		{"bytes */*", false, contentRange{}},
		{"bytes 0-10/10", false, contentRange{}}, // last past the size
		{"bytes 3-2/10", false, contentRange{}},
		{"bytes -1-2/10", false, contentRange{}},
		{"bytes +1-2/10", false, contentRange{}},
		{"bytes 0-1/1000000000000000000", false, contentRange{}}, // 19 digits
		{"bytes=0-1/10", false, contentRange{}},
		{"items 0-1/10", false, contentRange{}},
		{"bytes 0-1", false, contentRange{}},
		{"", false, contentRange{}},
	} {
		got, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseContentRange(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseXMLError(t *testing.T) {
	for _, tc := range []struct{ in, code, msg string }{
		{`<?xml version="1.0"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`, "NoSuchKey", "The specified key does not exist."},
		{`<Error><Code>A</Code><Message>x &amp; y &lt;z&gt; &quot;q&quot; &apos; &#65;&#x42; &bogus; &</Message></Error>`, "A", `x & y <z> "q" ' AB &bogus; &`},
		{`<Error><Code><![CDATA[C<1>]]></Code><Message>line1&#xA;line2	tab</Message></Error>`, "C<1>", "line1 line2 tab"},
		{`<Error><Code>Trunc`, "", ""},
		{`<html>502 Bad Gateway</html>`, "", ""},
		{"", "", ""},
	} {
		code, msg := parseXMLError([]byte(tc.in))
		if code != tc.code || msg != tc.msg {
			t.Errorf("parseXMLError(%q) = %q, %q; want %q, %q", tc.in, code, msg, tc.code, tc.msg)
		}
	}
	long := "<Message>" + string(make([]byte, 0)) + repeat("é", 300) + "</Message>"
	if _, m := parseXMLError([]byte(long)); len(m) > maxErrorText || len(m) != 256 {
		t.Errorf("long message kept %d bytes, want 256", len(m))
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"junk":                          0,
		"99999":                         time.Hour,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestBackoff_FullJitterBounds(t *testing.T) {
	for attempt, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 10: 5 * time.Second, 60: 5 * time.Second} {
		for range 200 {
			if d := backoff(100*time.Millisecond, 5*time.Second, attempt); d < 0 || d >= ceil {
				t.Fatalf("backoff(attempt %d) = %v, want [0, %v)", attempt, d, ceil)
			}
		}
	}
	if backoff(0, 0, 3) != 0 {
		t.Error("zero base waits")
	}
}
