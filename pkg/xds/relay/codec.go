package relay

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as bytes on the wire: the relay forwards what
// it received, never a re-encoding of it.
type frame struct{ b []byte }

// receivedFrame is a received message kept in grpc's own buffers, uncopied,
// so a response is forwarded without first being made contiguous. It
// holds one reference to buf until free.
type receivedFrame struct{ buf mem.BufferSlice }

func (f *receivedFrame) free() { f.buf.Free() }

// rawCodec moves frames unchanged. Its name is "proto" so both peers see
// the content type they expect.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch f := v.(type) {
	case *frame:
		return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
	case *receivedFrame:
		f.buf.Ref() // grpc frees what Marshal returns once it is written
		return f.buf, nil
	}
	return nil, fmt.Errorf("relay: cannot send %T", v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch f := v.(type) {
	case *frame:
		f.b = data.Materialize()
		return nil
	case *receivedFrame:
		data.Ref() // grpc frees data when Unmarshal returns
		f.buf = data
		return nil
	}
	return fmt.Errorf("relay: cannot receive into %T", v)
}
