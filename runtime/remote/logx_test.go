package remote

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/memtier/memtier/runtime/logx"
)

// MEMTIER_LOG lines of a read whose second part is throttled twice (503
// SlowDown) and then served: a warn line per throttle, and at info an info
// line per retry as well.
func TestLogThrottleAndRetryLines(t *testing.T) {
	for _, tc := range []struct {
		level int32
		want  func(url string) string
	}{
		{logx.Off, func(string) string { return "" }},
		{logx.Warn, func(u string) string {
			th := "memtier: warn: " + u + ": throttled (HTTP 503): ranged GETs in flight now at most 1\n"
			return th + th
		}},
		{logx.Info, func(u string) string {
			th := "memtier: warn: " + u + ": throttled (HTTP 503): ranged GETs in flight now at most 1\n"
			re := func(n string) string {
				return "memtier: info: " + u + " bytes=5308416-10551295: attempt " + n +
					" failed (HTTP 503 SlowDown: Please reduce your request rate.); retrying\n"
			}
			return th + re("1") + th + re("2")
		}},
	} {
		data := pattern(objSize, 1)
		s := newRangeServer(t, data)
		s.fault = onRange(secondPart, 2, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "0")
			xmlError(w, 503, "SlowDown", "Please reduce your request rate.")
		})
		o := fastOptions()
		o.MaxConcurrency = 1 // one part at a time: the lines come in order
		c := newClient(t, o)
		lines, restore := logx.Capture(tc.level)
		got, err := openAndRead(t, c, s.URL+"/obj", 0, objSize)
		restore()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("level %d: err %v, bytes equal %v", tc.level, err, bytes.Equal(got, data))
		}
		if want := tc.want(s.URL + "/obj"); lines() != want {
			t.Errorf("level %d: lines\n%s\nwant\n%s", tc.level, lines(), want)
		}
	}
}
