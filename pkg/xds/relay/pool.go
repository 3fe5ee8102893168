package relay

import (
	"sync"

	"google.golang.org/grpc/mem"
)

// dirtyPool is grpc's buffer pool for the relay's two connections, less
// its clearing of every buffer it hands out again: grpc reads a frame
// fully into the buffer it gets before anything reads it, so for a 1 MB
// response the clearing was a megabyte of memory written for nothing, on
// the path of every response.
type dirtyPool struct{ tiers [3]sync.Pool }

var poolSizes = [3]int{4 << 10, 16 << 10, 32 << 10} // up to grpc's 16 KiB frames, and its 32 KiB reads

var relayPool mem.BufferPool = &dirtyPool{}

func (p *dirtyPool) tier(size int) int {
	for i, s := range poolSizes {
		if size <= s {
			return i
		}
	}
	return -1
}

func (p *dirtyPool) Get(size int) *[]byte {
	i := p.tier(size)
	if i < 0 {
		b := make([]byte, size)
		return &b
	}
	if b, ok := p.tiers[i].Get().(*[]byte); ok {
		*b = (*b)[:size] // not cleared: see above
		return b
	}
	b := make([]byte, size, poolSizes[i])
	return &b
}

// Put keeps the buffers Get made for a tier; others are left to the GC.
func (p *dirtyPool) Put(b *[]byte) {
	if i := p.tier(cap(*b)); i >= 0 && cap(*b) == poolSizes[i] {
		p.tiers[i].Put(b)
	}
}

// decodeBuffers hold received responses made contiguous for decoding (of
// *[]byte). Decoding copies what is kept, so a buffer is reused for the
// next response: fresh memory for every megabyte costs several times the
// copy into it (page faults). The GC drops idle ones.
var decodeBuffers sync.Pool

// readContiguous calls read with buf's bytes in one slice, valid until it
// returns.
func readContiguous(buf mem.BufferSlice, read func([]byte)) {
	if len(buf) == 1 {
		read(buf[0].ReadOnlyData())
		return
	}
	b, _ := decodeBuffers.Get().(*[]byte)
	if b == nil || cap(*b) < buf.Len() {
		b = new([]byte)
		*b = make([]byte, buf.Len())
	}
	*b = (*b)[:buf.Len()]
	buf.CopyTo(*b)
	read(*b)
	decodeBuffers.Put(b)
}
