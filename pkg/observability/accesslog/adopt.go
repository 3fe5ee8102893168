package accesslog

import (
	"fmt"
	"io/fs"
	"os"
)

// FIFO is the open FIFO, to hand to the agent's next program
// (pkg/host/reexec): what Envoy writes meanwhile waits in the pipe. s
// keeps owning it.
func (s *Streamer) FIFO() *os.File { return s.fifo }

// Adopt reads the FIFO at opts.Path that an earlier program of this
// process opened and handed over (FIFO). Close removes it as Start's does.
func Adopt(opts Options, fifo *os.File) (*Streamer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	open, err := fifo.Stat()
	if err != nil || open.Mode()&fs.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("access-log FIFO %s: the handed-over file is not a FIFO", o.Path)
	}
	named, err := os.Lstat(o.Path)
	if err != nil || !os.SameFile(open, named) {
		return nil, fmt.Errorf("access-log FIFO %s: no longer the FIFO the agent reads (replaced?)", o.Path)
	}
	return start(o, fifo), nil
}
