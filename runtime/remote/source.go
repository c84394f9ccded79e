package remote

import (
	"sync"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/interrupt"
	"github.com/memtier/memtier/runtime/source"
)

var _ source.Source = (*Source)(nil)

// Table bounds: the Source remembers the versions it opened (so an Open
// within trust costs nothing) for at most maxEntries names, and keeps at
// most headBudget bytes of Open's head windows for Objects nobody holds.
const (
	maxEntries = 4096
	headBudget = 16 << 20
)

// Source is the source.Source of remote objects: names are s3://bucket/key,
// http://... or https://... URLs, read through one Client. Its Objects are
// *Object. Safe for concurrent use.
type Source struct {
	c   *Client
	now func() time.Time // tests pin the clock

	mu        sync.Mutex
	objs      map[string]*entry
	headBytes int64 // head bytes of the Objects in objs
}

// entry is the version of a name the Source opened last, and when it was
// last checked against the server.
type entry struct {
	obj     *Object
	checked time.Time
}

// NewSource returns a Source reading through c.
func NewSource(c *Client) *Source {
	return &Source{c: c, now: time.Now, objs: map[string]*entry{}}
}

// Client returns the Source's Client (for its Stats).
func (s *Source) Client() *Client { return s.c }

// Open returns name's current version with one reference taken, at the
// cost of at most one ranged GET:
//   - a name never opened (or forgotten): GET bytes=0-(OpenBytes-1), which
//     gives the size (Content-Range), the ETag and the first bytes, kept
//     in the Object so that a header read right after costs nothing;
//   - a name opened and checked less than trust ago (any time for
//     files.TrustForever, i.e. trust < 0): no request;
//   - otherwise a revalidation, the same GET with If-None-Match (or
//     If-Modified-Since without an ETag): 304 keeps the version; an answer
//     with another version replaces it, and its Version is returned as
//     staleVersion so the caller drops what it cached.
//
// Errors: errs.InvalidArg for a bad name (ParseURL), errs.NotFound,
// errs.Permission, errs.IO as described in fail, each naming the object.
func (s *Source) Open(name string, trust time.Duration) (source.Object, uint64, error) {
	loc, err := ParseURL(name)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	s.mu.Lock()
	e := s.objs[name]
	if e != nil && (trust < 0 || (trust > 0 && now.Sub(e.checked) < trust)) {
		e.obj.refs.Add(1)
		s.mu.Unlock()
		return e.obj, 0, nil
	}
	s.mu.Unlock()

	var old *Object
	if e != nil {
		old = e.obj
	}
	var obj *Object
	interrupt.Do(func() { obj, err = s.c.open(s.c.callContext(), name, loc, old) })
	if err != nil {
		if old != nil && errs.CodeOf(err) == errs.NotFound {
			// The object went away: forget it, and tell the caller its
			// cached bytes are stale.
			s.forget(name, old)
			return nil, old.version, err
		}
		return nil, 0, err
	}
	if obj == nil { // 304: unchanged
		s.mu.Lock()
		if cur := s.objs[name]; cur != nil && cur.obj == old {
			cur.checked = now
		}
		old.refs.Add(1)
		s.mu.Unlock()
		return old, 0, nil
	}
	obj.refs.Add(1)
	stale := s.insert(name, obj, now)
	if old != nil && old.version != obj.version {
		stale = old.version
	}
	return obj, stale, nil
}

// insert makes obj the remembered version of name and returns the version
// it replaced if that differs (0 otherwise), then trims the table.
func (s *Source) insert(name string, obj *Object, now time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stale uint64
	if cur := s.objs[name]; cur != nil {
		s.dropHeadLocked(cur.obj)
		if cur.obj.version != obj.version {
			stale = cur.obj.version
		}
	}
	s.objs[name] = &entry{obj: obj, checked: now}
	s.headBytes += int64(len(obj.headBytes()))
	if len(s.objs) > maxEntries || s.headBytes > headBudget {
		// Drop the heads of Objects nobody holds, then forget such names
		// while over the entry bound (map order: arbitrary ones).
		for n, e := range s.objs {
			if e.obj.refs.Load() > 0 {
				continue
			}
			s.dropHeadLocked(e.obj)
			if len(s.objs) > maxEntries && n != name {
				delete(s.objs, n)
			}
		}
	}
	return stale
}

// forget removes name if it still maps to obj.
func (s *Source) forget(name string, obj *Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.objs[name]; cur != nil && cur.obj == obj {
		s.dropHeadLocked(obj)
		delete(s.objs, name)
	}
}

// Drop forgets name ("" = every name), so the next Open asks the server
// again whatever its trust, and returns the versions it forgot, for the
// caller to drop what it cached of them (memtier_drop_cache). Objects still
// held stay readable at their version.
func (s *Source) Drop(name string) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for n, e := range s.objs {
		if name != "" && n != name {
			continue
		}
		s.dropHeadLocked(e.obj)
		delete(s.objs, n)
		out = append(out, e.obj.version)
	}
	return out
}

func (s *Source) dropHeadLocked(o *Object) {
	if p := o.head.Swap(nil); p != nil {
		s.headBytes -= int64(len(*p))
	}
}

// ReadAt fills dst with the bytes of o at off: a prefix from the head
// window Open kept, the rest as ranged GETs of Options.PartBytes run in
// parallel (Client.ReadObject). path is ignored (no O_DIRECT remotely) and
// PathBuffered is reported. Errors: errs.EOF for a range past o's size; a
// part that gave up (see fail), the first one to fail, with the others
// canceled; errs.IO "changed since open" when the object was overwritten.
func (s *Source) ReadAt(o source.Object, dst []byte, off uint64, path int) (int, error) {
	ro, ok := o.(*Object)
	if !ok {
		return 0, errs.New(errs.Internal, "remote read", "object %q is not from a remote.Source", o.Name())
	}
	if err := s.c.ReadObject(s.c.callContext(), ro, dst, off); err != nil {
		return 0, err
	}
	return source.PathBuffered, nil
}

// ReadNoWait reports false: every remote read waits for the network, and
// starting one as "readahead" would spend connections on a guess.
func (s *Source) ReadNoWait(o source.Object, dst []byte, off uint64) bool { return false }

// Resident reports (0, true): no page cache stands in front of a remote
// object, so the Source knows that none of it is close. (known=false would
// be read the same way, as cold, by the policy; true says it is a fact, not
// a missing measurement, in explain.)
func (s *Source) Resident(o source.Object, off, size uint64, samples int) (uint64, bool) {
	return 0, true
}

// DirectRefused reports false: O_DIRECT does not apply, and ReadAt ignores
// the path, so it is never refused.
func (s *Source) DirectRefused(o source.Object) bool { return false }
