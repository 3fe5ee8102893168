// Package accesslog streams the TCP access-log lines Envoy writes into the
// FIFO kuma-cp points every zone-listener logger at
// (kumasock.AccessLog) to their backends, as kuma-dp does.
//
// Line forms and forwarded bytes are kuma-dp's. Where it differs, on purpose:
//   - The reader is held O_RDWR, so Envoy's open never blocks start-up and a
//     writer closing (/reopen_logs, an Envoy restart) is not EOF; kuma-dp
//     stops reading forever after the first EOF.
//   - Each backend has its own goroutine, queue bounded in lines and bytes
//     (oldest dropped when full), write deadline and reconnect backoff, so a
//     slow or dead backend never stalls the FIFO or the other backends.
//     kuma-dp is single-threaded, has no deadlines and drops every line while
//     a backend is down.
//   - A backend with no new line for IdleTimeout is closed and forgotten;
//     kuma-dp keeps every connection it ever opened.
//   - Lines are bounded in length, addresses must be host:port, a closed
//     connection is noticed before the next line is lost on it, and drops are
//     counted by reason instead of logged per line.
//   - The FIFO is 0600 and removed on Close; queued lines get a short flush.
package accesslog
