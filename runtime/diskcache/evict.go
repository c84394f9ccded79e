package diskcache

import (
	"os"
	"sort"
	"strings"
	"time"
)

// lowWater is the share of the budget an eviction brings the directory
// down to (15/16), so that a full cache rescans once per budget/16 bytes
// written rather than on every write.
func (c *Cache) lowWater(need uint64) uint64 {
	lw := c.budget - c.budget/16
	if lw < need {
		return c.budget
	}
	return lw
}

// scanLocked lists the directory, removes temporary files older than
// staleTmp, and, when the entries plus need bytes exceed the budget (or
// always is set and they exceed it), removes the entries used longest ago
// (oldest mtime first) until they fit lowWater(need). It returns the bytes
// the directory holds afterwards (entries and live temporary files, by
// file size). Call with the lock held.
func (c *Cache) scanLocked(need uint64, always bool) uint64 {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return c.used.Load()
	}
	type ent struct {
		name  string
		size  uint64
		mtime time.Time
	}
	var ents []ent
	var total uint64
	now := time.Now()
	for _, de := range des {
		name := de.Name()
		isTmp := strings.HasPrefix(name, tmpPrefix)
		if !isTmp && !strings.HasSuffix(name, entrySuffix) {
			continue
		}
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if isTmp {
			if now.Sub(info.ModTime()) > staleTmp && os.Remove(c.path(name)) == nil {
				continue
			}
			total += uint64(info.Size())
			continue
		}
		ents = append(ents, ent{name, uint64(info.Size()), info.ModTime()})
		total += uint64(info.Size())
	}
	if total+need <= c.budget && !(always && total > c.budget) {
		return total
	}
	target := c.lowWater(need)
	sort.Slice(ents, func(i, j int) bool { return ents[i].mtime.Before(ents[j].mtime) })
	for _, e := range ents {
		if total+need <= target {
			break
		}
		c.fds.forget(e.name)
		if err := os.Remove(c.path(e.name)); err == nil || os.IsNotExist(err) {
			total -= e.size
			c.st.evictedEntries.Add(1)
			c.st.evictedBytes.Add(e.size)
		}
	}
	return total
}

// reserve makes room for an entry of n bytes and creates its temporary
// file, already n bytes long, so that the recorded usage and any scan
// count it from the start: the directory never holds more than the
// budget, temporary files included.
func (c *Cache) reserve(n uint64) (*os.File, error) {
	if err := c.lock(); err != nil {
		return nil, err
	}
	defer c.unlock()
	u, ok := c.readUsage()
	if !ok || u+n > c.budget {
		u = c.scanLocked(n, false)
	}
	if u+n > c.budget {
		c.writeUsage(u)
		return nil, errNoRoom
	}
	f, err := os.CreateTemp(c.dir, tmpPrefix)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(int64(n)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	c.writeUsage(u + n)
	return f, nil
}

// commit renames the temporary file tmp (n bytes, closed) to name, unless
// another writer made that entry meanwhile, in which case tmp is removed.
func (c *Cache) commit(tmp, name string, n uint64) (bool, error) {
	if err := c.lock(); err != nil {
		os.Remove(tmp)
		return false, err
	}
	defer c.unlock()
	u, ok := c.readUsage()
	if _, err := os.Lstat(c.path(name)); err == nil {
		os.Remove(tmp)
		if ok && u >= n {
			c.writeUsage(u - n)
		}
		return false, nil
	}
	if err := os.Rename(tmp, c.path(name)); err != nil {
		os.Remove(tmp)
		if ok && u >= n {
			c.writeUsage(u - n)
		}
		return false, err
	}
	return true, nil
}

// abort removes the temporary file tmp of n reserved bytes.
func (c *Cache) abort(tmp string, n uint64) {
	os.Remove(tmp)
	if c.lock() != nil {
		return
	}
	defer c.unlock()
	if u, ok := c.readUsage(); ok && u >= n {
		c.writeUsage(u - n)
	}
}

// dropEntry removes the entry name if it is still the file with inode ino
// (a writer may have replaced a corrupt entry with a good one since it was
// read), and takes its bytes off the record.
func (c *Cache) dropEntry(name string, ino uint64, size uint64) {
	if c.lock() != nil {
		return
	}
	defer c.unlock()
	if cur, ok := inodeOf(c.path(name)); !ok || cur != ino {
		return
	}
	c.fds.forget(name)
	if os.Remove(c.path(name)) == nil {
		if u, ok := c.readUsage(); ok && u >= size {
			c.writeUsage(u - size)
		}
	}
}

// pruneVersions removes the entries of k's object at every other version
// (an overwritten object's old bytes), once per key and Cache.
func (c *Cache) pruneVersions(k *Key) {
	if _, done := c.pruned.LoadOrStore(k.idHash+k.verHash, true); done {
		return
	}
	if c.prunedN.Add(1) > maxPruned { // bound the memory: forget, and maybe scan again
		c.pruned.Clear()
		c.prunedN.Store(0)
	}
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	mine := k.idHash + "-" + k.verHash + "-"
	var old []string
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, k.idHash+"-") && !strings.HasPrefix(n, mine) && strings.HasSuffix(n, entrySuffix) {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return
	}
	if c.lock() != nil {
		return
	}
	defer c.unlock()
	u, ok := c.readUsage()
	for _, n := range old {
		info, err := os.Lstat(c.path(n))
		if err != nil {
			continue
		}
		c.fds.forget(n)
		if os.Remove(c.path(n)) == nil {
			c.st.staleEntries.Add(1)
			if ok && u >= uint64(info.Size()) {
				u -= uint64(info.Size())
			}
		}
	}
	if ok {
		c.writeUsage(u)
	}
}
