package iopath

import "testing"

// FuzzDirectPlan checks splitTasks and alignWindow against naive references:
// tasks cover [off, off+n) exactly once, in order, each inside one
// taskBytes-aligned block; windows are aligned, contain the range, and are the
// smallest such.
func FuzzDirectPlan(f *testing.F) {
	for _, s := range [][4]int64{
		{0, 0, 4 << 20, 4096},
		{0, 1, 4 << 20, 512},
		{4095, 2, 65536, 4096},
		{4097, 3, 65536, 512},
		{8190, 1810, 4 << 20, 4096},
		{1<<20 + 1, 64<<20 + 3, 1 << 20, 4096},
		{2147479548, 2300000000, 4 << 20, 4096},
		{1<<62 - 1<<31 + 5, 1 << 30, 1 << 30, 1 << 16},
		{7, 100, 3, 3}, // non power-of-two sizes still work
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, off, n, taskBytes, align int64) {
		if off < 0 || n < 0 || taskBytes <= 0 || align <= 0 || align > 1<<30 ||
			off > 1<<62 || n > 1<<40 || n/taskBytes > 1<<14 {
			t.Skip()
		}
		end := off + n

		p := splitTasks(off, n, taskBytes)
		var want [][2]int64 // the reference: walk boundary by boundary
		for pos := off; pos < end; {
			next := min((pos/taskBytes+1)*taskBytes, end)
			want = append(want, [2]int64{pos, next})
			pos = next
		}
		if p.count != len(want) {
			t.Fatalf("splitTasks(%d, %d, %d): %d tasks, want %d", off, n, taskBytes, p.count, len(want))
		}
		for i, w := range want {
			s, e := p.task(i)
			if s != w[0] || e != w[1] {
				t.Fatalf("task %d = [%d, %d), want [%d, %d)", i, s, e, w[0], w[1])
			}
			if e <= s || e-s > taskBytes || s/taskBytes != (e-1)/taskBytes {
				t.Fatalf("task %d [%d, %d) is empty or crosses a %d boundary", i, s, e, taskBytes)
			}
		}

		ws, we := alignWindow(off, n, align)
		if ws%align != 0 || we%align != 0 || ws > off || we < end {
			t.Fatalf("alignWindow(%d, %d, %d) = [%d, %d): not aligned or not covering", off, n, align, ws, we)
		}
		if off-ws >= align || we-end >= align {
			t.Fatalf("alignWindow(%d, %d, %d) = [%d, %d): larger than needed", off, n, align, ws, we)
		}
	})
}
