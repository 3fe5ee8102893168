package accesslog

import (
	"bytes"
	"encoding/json"
	"net"
	"strconv"
)

// envelope is what Envoy's json_format writes for a TCP backend.
type envelope struct {
	Address string          `json:"address"`
	Message json.RawMessage `json:"message"`
}

// parseLine returns the backend address and the exact bytes to send for one
// FIFO line (without its '\n'), following kuma-dp: a JSON string message is
// sent verbatim, a JSON object message as Go's json.Marshal of it plus '\n',
// and a legacy "address;text" line as everything after the first ';' plus
// the line's own '\n'. ok is false for anything else.
func parseLine(line []byte) (addr string, payload []byte, ok bool) {
	var env envelope
	if err := json.Unmarshal(line, &env); err == nil {
		payload, ok = jsonPayload(env.Message)
		return env.Address, payload, ok && validAddress(env.Address)
	}
	addrPart, text, found := bytes.Cut(line, []byte{';'})
	if !found || !validAddress(string(addrPart)) {
		return "", nil, false
	}
	payload = make([]byte, 0, len(text)+1)
	return string(addrPart), append(append(payload, text...), '\n'), true
}

func jsonPayload(raw json.RawMessage) ([]byte, bool) {
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return []byte(s), true
	case len(raw) > 0 && raw[0] == '{':
		// UseNumber keeps the digits Envoy wrote; for integers up to 2^53
		// the output is the same as kuma-dp's float64 round trip.
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) != nil {
			return nil, false
		}
		out, err := json.Marshal(obj)
		if err != nil {
			return nil, false
		}
		return append(out, '\n'), true
	}
	// kuma-cp only ever writes a string or an object; a null, number or
	// missing message is not a log line.
	return nil, false
}

// validAddress accepts host:port with a hostname or IP and a port in 1-65535,
// so garbage does not become a backend that is dialled forever.
func validAddress(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return false
	}
	for _, c := range host {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == '_', c == ':', c == '%':
		default:
			return false
		}
	}
	return true
}
