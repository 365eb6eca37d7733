package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// checkPages walks the bbolt page tree of the file r of size bytes, each
// page read into Go memory (bounds-checked, never the map), from the meta page bbolt would use (the
// valid one of higher txid): every page the tree, its buckets (inline
// ones too) and the freelist refer to, each element and each key and
// value on them. It returns each way in which a page, element, key or
// value lies outside the file, or a page is not what it must be (its id,
// its type), or is reached twice (a loop would make bbolt recurse
// forever); none: every read bbolt's Tx.Check makes lies inside the file,
// so it can run in its goroutine without faulting (see damage.go).
//
// The format (go.etcd.io/bbolt/internal/common, native byte order): a
// page is a 16-byte header (id u64, flags u16, count u16, overflow u32:
// the pages after it that it spans) then count elements of 16 bytes; a
// branch element is pos u32, ksize u32, pgid u64 (the child), a leaf
// element flags u32, pos u32, ksize u32, vsize u32, the key pos bytes
// after the element, the value after the key. A leaf element with flag
// 1 is a bucket: its value is the bucket's root page id (u64) and
// sequence (u64), then, for root 0 (inline), the bucket's own leaf page.
// A freelist page's count is its page ids (u64 each), or, at 0xFFFF, the
// first u64 is the count.
func checkPages(r io.ReaderAt, size int64) []string {
	w := &pageWalk{r: r, size: uint64(size), seen: map[uint64]bool{}}
	ps := uint64(os.Getpagesize())
	first := make([]byte, 4096)
	n, _ := r.ReadAt(first, 0)
	if m, ok := readMeta(first[:n]); ok {
		ps = uint64(m.pageSize)
	}
	if ps < 1024 || ps > 1<<20 {
		return []string{fmt.Sprintf("pages: page size %d", ps)}
	}
	w.ps = ps
	root, freelist, ok := w.meta()
	if !ok {
		return []string{"pages: neither meta page is valid"}
	}
	w.seen[0], w.seen[1] = true, true
	if freelist != noFreelist {
		w.freelist(freelist)
	}
	w.tree(root, "the root bucket")
	return w.problems
}

// noFreelist is bbolt's freelist page id of a file whose freelist is
// not stored (common.PgidNoFreelist).
const noFreelist = ^uint64(0)

// Page flags (common.BranchPageFlag, ...) and the leaf element flag of a
// bucket (common.BucketLeafFlag).
const (
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01
	pageHeader   = 16
	elementSize  = 16
)

type pageWalk struct {
	r        io.ReaderAt
	size     uint64          // r's
	ps       uint64          // the page size
	hwm      uint64          // the meta's high-water mark: pages in use are below it
	seen     map[uint64]bool // pages reached (and those they span)
	problems []string
}

func (w *pageWalk) problem(format string, args ...any) {
	w.problems = append(w.problems, "pages: "+fmt.Sprintf(format, args...))
}

// meta picks the meta page bbolt uses (db.meta: the higher txid of the
// valid ones) and returns its root bucket page and freelist page.
func (w *pageWalk) meta() (root, freelist uint64, ok bool) {
	ne := binary.NativeEndian
	var txid uint64
	for i := range uint64(2) {
		p := make([]byte, metaOffset+metaSumBytes+8)
		if _, err := w.r.ReadAt(p, int64(i*w.ps)); err != nil {
			continue
		}
		m, valid := readMeta(p)
		if !valid || ok && m.txid <= txid {
			continue
		}
		ok, txid, w.hwm = true, m.txid, m.pages
		root, freelist = ne.Uint64(p[metaOffset+16:]), ne.Uint64(p[metaOffset+32:])
	}
	return root, freelist, ok
}

// page returns page id whole (with the pages it spans), or false after
// saying why it cannot be read as a page of type want (a mask of flags)
// reached from where.
func (w *pageWalk) page(id uint64, want uint16, where string) ([]byte, bool) {
	ne := binary.NativeEndian
	switch {
	case id < 2 || id >= w.hwm:
		w.problem("%s refers to page %d, outside the pages in use (2 to %d)", where, id, w.hwm-1)
		return nil, false
	case w.seen[id]:
		w.problem("%s refers to page %d, which is reached twice", where, id)
		return nil, false
	case (id+1)*w.ps > w.size:
		w.problem("%s refers to page %d, past the end of the file", where, id)
		return nil, false
	}
	p := make([]byte, w.ps) // the page itself; the pages it spans are read below
	if _, err := w.r.ReadAt(p, int64(id*w.ps)); err != nil {
		w.problem("page %d (%s): %v", id, where, err)
		return nil, false
	}
	hdr, flags, overflow := ne.Uint64(p), ne.Uint16(p[8:]), uint64(ne.Uint32(p[12:]))
	end := (id + 1 + overflow) * w.ps
	switch {
	case hdr != id:
		w.problem("page %d (%s) says it is page %d", id, where, hdr)
		return nil, false
	case flags&want == 0 || flags&(flags-1) != 0:
		w.problem("page %d (%s) has type flags %#x", id, where, flags)
		return nil, false
	case id+overflow >= w.hwm || end > w.size:
		w.problem("page %d (%s) spans %d pages, past the pages in use", id, where, overflow+1)
		return nil, false
	}
	for i := id; i <= id+overflow; i++ {
		if w.seen[i] {
			w.problem("page %d (%s) spans page %d, which is reached twice", id, where, i)
			return nil, false
		}
		w.seen[i] = true
	}
	if overflow > 0 {
		p = append(p, make([]byte, overflow*w.ps)...)
		if _, err := w.r.ReadAt(p[w.ps:], int64((id+1)*w.ps)); err != nil {
			w.problem("page %d (%s): %v", id, where, err)
			return nil, false
		}
	}
	return p, true
}

// freelist checks the freelist page id.
func (w *pageWalk) freelist(id uint64) {
	p, ok := w.page(id, freelistPage, "the meta page's freelist")
	if !ok {
		return
	}
	ne := binary.NativeEndian
	start, count := uint64(pageHeader), uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		count, start = ne.Uint64(p[pageHeader:]), pageHeader+8
	}
	if count > uint64(len(p))/8 || start+count*8 > uint64(len(p)) {
		w.problem("the freelist (page %d) counts %d pages, more than it holds", id, count)
	}
}

// tree checks the bucket tree whose root is page id.
func (w *pageWalk) tree(id uint64, where string) {
	p, ok := w.page(id, branchPage|leafPage, where)
	if ok {
		w.node(p, id, where)
	}
}

// node checks the elements of branch or leaf page p (page id; 0 for an
// inline bucket's page) and what they refer to.
func (w *pageWalk) node(p []byte, id uint64, where string) {
	ne := binary.NativeEndian
	flags, count := ne.Uint16(p[8:]), uint64(ne.Uint16(p[10:]))
	name := fmt.Sprintf("page %d", id)
	if id == 0 {
		name = "the inline page of " + where
	}
	switch {
	case pageHeader+count*elementSize > uint64(len(p)):
		w.problem("%s (%s) counts %d elements, more than it holds", name, where, count)
		return
	case count == 0 && flags&branchPage != 0:
		w.problem("%s (%s) is a branch page without elements", name, where)
		return
	}
	for i := range count {
		off := pageHeader + i*elementSize
		e := p[off:]
		if flags&branchPage != 0 {
			pos, ksize, child := uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
			if off+pos+ksize > uint64(len(p)) {
				w.problem("%s element %d: its key lies past the page", name, i)
				return
			}
			w.tree(child, fmt.Sprintf("%s element %d", name, i))
			continue
		}
		eflags, pos, ksize, vsize := ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		kv := off + pos
		if kv+ksize+vsize > uint64(len(p)) {
			w.problem("%s element %d: its key or value lies past the page", name, i)
			return
		}
		if eflags&bucketLeaf == 0 {
			continue
		}
		bucket := fmt.Sprintf("bucket %q", p[kv:kv+ksize])
		v := p[kv+ksize : kv+ksize+vsize]
		switch {
		case vsize < 16:
			w.problem("%s element %d: %s has a %d-byte header", name, i, bucket, vsize)
		case ne.Uint64(v) != 0:
			w.tree(ne.Uint64(v), bucket)
		case vsize < 16+pageHeader:
			w.problem("%s element %d: inline %s has no page", name, i, bucket)
		case ne.Uint16(v[16+8:]) != leafPage:
			w.problem("%s element %d: inline %s's page has type flags %#x", name, i, bucket, ne.Uint16(v[16+8:]))
		default:
			w.node(v[16:], 0, bucket)
		}
	}
}
