package xdsrelay

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as bytes on the wire: the relay forwards what
// it received, never a re-encoding of it.
type frame struct{ b []byte }

// rawCodec moves frames unchanged. Its name is "proto" so both peers see
// the content type they expect.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("xdsrelay: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("xdsrelay: cannot receive into %T", v)
	}
	f.b = data.Materialize()
	return nil
}
