package relay

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// deltaResourcesField is DeltaDiscoveryResponse.resources.
const deltaResourcesField = 2

// yieldEvery is how many resources the observer decodes between yields: a
// response of thousands decoded in one go holds a CPU for a millisecond
// while the forwarding goroutines wait for it.
const yieldEvery = 64

// splitRepeated separates the occurrences of one repeated message field,
// num, from the rest of msg: the entries alias msg, the rest is a copy of
// the other fields, uninterpreted, for the generated type to decode. The
// entries can then be decoded one at a time.
func splitRepeated(msg []byte, num protowire.Number) (rest []byte, entries [][]byte, err error) {
	for len(msg) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(msg)
		if tagLen < 0 {
			return nil, nil, fmt.Errorf("malformed message: %w", protowire.ParseError(tagLen))
		}
		valLen := protowire.ConsumeFieldValue(n, typ, msg[tagLen:])
		if valLen < 0 {
			return nil, nil, fmt.Errorf("malformed field %d: %w", n, protowire.ParseError(valLen))
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(msg[tagLen:])
			entries = append(entries, v)
		} else {
			rest = append(rest, msg[:tagLen+valLen]...)
		}
		msg = msg[tagLen+valLen:]
	}
	return rest, entries, nil
}
