package h2

import (
	"sync"
	"time"
)

// Handler goroutines are reused. A stream's handler runs a deep call
// chain (the proxy's exchange, the backend client): on a new goroutine
// each request paid to grow its stack, copied twice or three times on
// the way (runtime.newstack, 6% of the proxy's CPU under h2load). A
// goroutine that has served a stream parks in the Server's pool and
// serves the next one with the stack it already has. The pool is
// bounded (maxIdleWorkers), LIFO (the most recently used stack is the
// warmest) and reaped: a worker idle for workerIdleTimeout ends.

const (
	// maxIdleWorkers bounds the parked goroutines (each holds its
	// stack, typically 8-32 KiB, until the GC shrinks it).
	maxIdleWorkers = 256
	// workerIdleTimeout is how long a parked worker waits for a stream
	// before it ends.
	workerIdleTimeout = 2 * time.Second
)

// workerPool holds the parked handler goroutines of one Server.
type workerPool struct {
	mu    sync.Mutex
	idle  []*worker // LIFO: idle[len-1] parked last
	reap  *time.Timer
	armed bool
}

// worker is one parked goroutine: a stream sent on next runs on it; nil
// ends it.
type worker struct {
	next   chan *stream
	conn   *conn
	parked time.Time
}

// run serves st on a parked worker, or on a new goroutine when none is
// parked.
func (p *workerPool) run(c *conn, st *stream) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.conn = c
		w.next <- st
		return
	}
	p.mu.Unlock()
	w := &worker{next: make(chan *stream, 1), conn: c}
	go p.loop(w, st)
}

// loop is a worker's life: serve, park, serve what comes next, until
// the pool is full or the worker is reaped.
func (p *workerPool) loop(w *worker, st *stream) {
	for st != nil {
		w.conn.runHandler(st)
		w.conn = nil
		if !p.park(w) {
			return
		}
		st = <-w.next
	}
}

// park puts w on the idle stack, reporting false when the pool is full
// (w ends instead).
func (p *workerPool) park(w *worker) bool {
	w.parked = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleWorkers {
		return false
	}
	p.idle = append(p.idle, w)
	if !p.armed {
		p.armed = true
		if p.reap == nil {
			p.reap = time.AfterFunc(workerIdleTimeout, p.reapIdle)
		} else {
			p.reap.Reset(workerIdleTimeout)
		}
	}
	return true
}

// reapIdle ends the workers parked for workerIdleTimeout or longer (the
// bottom of the stack is the longest parked) and re-arms itself while
// any stay parked.
func (p *workerPool) reapIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].parked) >= workerIdleTimeout {
		p.idle[n].next <- nil
		p.idle[n] = nil
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	p.armed = len(p.idle) > 0
	if p.armed {
		p.reap.Reset(workerIdleTimeout - now.Sub(p.idle[0].parked))
	}
}
