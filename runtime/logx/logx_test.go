package logx

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// reset makes the package read the level again from env and write to a buffer.
func reset(t *testing.T, env string) *strings.Builder {
	t.Helper()
	var b strings.Builder
	out = &b
	level.Store(-1)
	keys = sync.Map{}
	SetGetenv(func(name string) string {
		if name == Var {
			return env
		}
		return ""
	})
	t.Cleanup(func() { level.Store(-1); nowFunc = time.Now })
	return &b
}

func TestLevels(t *testing.T) {
	want := map[string]string{
		"":        "",
		"off":     "",
		"warn":    "memtier: warn: w 1\n",
		"info":    "memtier: warn: w 1\nmemtier: info: i 2\n",
		" Debug ": "memtier: warn: w 1\nmemtier: info: i 2\nmemtier: debug: d 3\n",
	}
	for env, w := range want {
		b := reset(t, env)
		Warnf("k1", "w %d", 1)
		Infof("k2", "i %d", 2)
		Debugf("k3", "d %d", 3)
		if b.String() != w {
			t.Errorf("MEMTIER_LOG=%q: got %q, want %q", env, b.String(), w)
		}
	}
}

func TestUnknownLevelWarnsOnceAndIsOff(t *testing.T) {
	b := reset(t, "verbose")
	Warnf("k", "x")
	Warnf("k", "x")
	if got, want := b.String(), "memtier: warning: MEMTIER_LOG=verbose is not a level (off, warn, info, debug); logging is off\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if Level() != Off {
		t.Fatalf("level %d", Level())
	}
}

func TestRateLimitPerKey(t *testing.T) {
	b := reset(t, "warn")
	now := time.Unix(1000, 0)
	nowFunc = func() time.Time { return now }
	for i := 0; i < 100; i++ { // a hot loop: the burst, then one line a second
		Warnf("hot", "n %d", i)
	}
	Warnf("other", "o") // another key has its own budget
	now = now.Add(time.Second)
	Warnf("hot", "n %d", 100)
	Warnf("hot", "n %d", 101) // within the second: dropped
	now = now.Add(2 * time.Second)
	Warnf("hot", "n %d", 102)
	want := "memtier: warn: n 0\nmemtier: warn: n 1\nmemtier: warn: n 2\nmemtier: warn: n 3\nmemtier: warn: n 4\n" +
		"memtier: warn: o\n" +
		"memtier: warn: n 100 (95 similar lines suppressed)\n" +
		"memtier: warn: n 102 (1 similar lines suppressed)\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestParse(t *testing.T) {
	for i, n := range Names {
		if l, ok := Parse(strings.ToUpper(n)); !ok || l != int32(i) {
			t.Errorf("Parse(%q) = %d, %v", n, l, ok)
		}
	}
	if _, ok := Parse("2"); ok {
		t.Error("Parse(2) ok")
	}
}
