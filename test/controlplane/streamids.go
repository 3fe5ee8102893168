package controlplane

import "sync"

// Which go-control-plane server numbered a stream.
type streamProtocol int

const (
	deltaStreams streamProtocol = iota
	sotwStreams
)

// String is the protocol as ProxyInfo.Protocol names it.
func (p streamProtocol) String() string {
	if p == sotwStreams {
		return ProtocolSotW
	}
	return ProtocolDelta
}

// streamIDs gives every ADS stream, SotW or delta, one id of the control
// plane's: go-control-plane numbers each protocol's streams from 1, and
// the lifecycle (one stream per node, the store's streamId) needs them
// apart.
type streamIDs struct {
	mu   sync.Mutex
	next int64
	byGo [2]map[int64]int64
}

func newStreamIDs() *streamIDs {
	return &streamIDs{byGo: [2]map[int64]int64{{}, {}}}
}

func (ids *streamIDs) open(p streamProtocol, goID int64) int64 {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.next++
	ids.byGo[p][goID] = ids.next
	return ids.next
}

// get is 0 for a stream never opened.
func (ids *streamIDs) get(p streamProtocol, goID int64) int64 {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.byGo[p][goID]
}

func (ids *streamIDs) close(p streamProtocol, goID int64) int64 {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	id := ids.byGo[p][goID]
	delete(ids.byGo[p], goID)
	return id
}
