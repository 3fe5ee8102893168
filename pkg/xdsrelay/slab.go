package xdsrelay

import (
	"sync"
	"sync/atomic"
)

// slab holds a received response's bytes, which the resources observed in
// it alias. It is reused for a later response once nothing refers to it:
// its pending response and each held resource count one reference. Fresh
// memory for every megabyte of response costs several times the copy
// into it (page faults), so the relay recycles.
//
// What may outlive a reference never aliases a slab: held names, versions
// and type URLs are copies (made once per name, see holdings.apply), so
// are the names events carry, and the cache gets its bodies copied by
// export.
type slab struct {
	b    []byte
	refs atomic.Int32
}

var (
	slabPool sync.Pool // of *slab; the GC drops idle ones
	recycle  = func(s *slab) { slabPool.Put(s) }
)

// newSlab is a slab of n bytes (contents undefined) with one reference.
func newSlab(n int) *slab {
	s, ok := slabPool.Get().(*slab)
	if !ok || cap(s.b) < n {
		s = &slab{b: make([]byte, n)}
	}
	s.b = s.b[:n]
	s.refs.Store(1)
	return s
}

// hold adds n references; release drops n, and recycles the slab with the
// last. Both accept a nil slab (bytes that are not recycled).
func (s *slab) hold(n int32) {
	if s != nil {
		s.refs.Add(n)
	}
}

func (s *slab) release(n int32) {
	if s == nil {
		return
	}
	switch refs := s.refs.Add(-n); {
	case refs == 0:
		recycle(s)
	case refs < 0:
		panic("xdsrelay: a response's bytes were released more often than held")
	}
}

// releases batches releases of consecutive resources' slabs.
type releases struct {
	s *slab
	n int32
}

func (r *releases) add(s *slab) {
	if s != r.s {
		r.flush()
		r.s = s
	}
	r.n++
}

func (r *releases) flush() {
	if r.n > 0 {
		r.s.release(r.n)
	}
	r.s, r.n = nil, 0
}
