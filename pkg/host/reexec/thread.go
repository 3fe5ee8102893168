package reexec

import (
	"runtime"
	"sync"
)

// The process thread. Envoy is started with a parent-death signal, which
// the kernel sends when the *thread* that forked it ends, and execve ends
// every thread of the process but its caller. So Envoy is forked, and the
// program replaced, on one thread only: the main thread, which execve keeps
// and the new program runs on in turn (Go never ends its main thread). The
// agent's Envoy thus survives any number of reloads, and still dies with
// the process, whichever program runs in it.

var (
	requests = make(chan func())
	served   bool // Main serves requests on the main thread
	fallback sync.Once
	servedMu sync.Mutex
)

// Main runs program on another goroutine and serves Do on the calling one
// until program returns, whose result it returns. The caller must run on
// the main thread, locked to it: package main's init calls
// runtime.LockOSThread.
func Main(program func() int) int {
	servedMu.Lock()
	served = true
	servedMu.Unlock()
	result := make(chan int, 1)
	go func() { result <- program() }()
	for {
		select {
		case f := <-requests:
			f()
		case code := <-result:
			return code
		}
	}
}

// Do runs f on the process thread and returns once it has. Without Main
// (tests), the process thread is a goroutine locked to a thread of its
// own, never unlocked, so that thread lives as long as the process.
func Do(f func()) {
	servedMu.Lock()
	if !served {
		fallback.Do(func() {
			go func() {
				runtime.LockOSThread() // never unlocked: the thread must not end
				for f := range requests {
					f()
				}
			}()
		})
	}
	servedMu.Unlock()
	done := make(chan struct{})
	requests <- func() {
		defer close(done)
		f()
	}
	<-done
}
