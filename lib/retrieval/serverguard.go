package retrieval

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// This file holds what keeps the server up under bad clients and bad
// indexes: a cap on open connections, panics turned into a 500 for the one
// request that met them, and body reads that a shutdown cuts short.

// limitListener holds Accept while max connections are open: further
// clients wait in the kernel's listen backlog rather than costing a file
// descriptor and a goroutine each.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, max), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// recoverHandler answers a panic in a handler with a 500 naming it, so a
// bug met by one request costs that request only (net/http would drop the
// connection without an answer).
func recoverHandler(h http.Handler, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				logPanic(logger, fmt.Sprintf("%s %s", r.Method, r.URL.Path), p)
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprintf("internal error: %v", p)})
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func logPanic(logger *log.Logger, where string, p any) {
	if logger == nil {
		logger = log.Default()
	}
	logger.Printf("panic in %s: %v\n%s", where, p, debug.Stack())
}

// runSafely runs a batch and, when the search panics (a damaged index the
// checks at open did not catch, a bug), fails the batch's requests with a
// 500 instead of taking the process down.
func (s *Server) runSafely(batch []*job) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(s.logger, "search", p)
			for _, j := range batch {
				if j.err == nil {
					j.err = fmt.Errorf("internal error in the search: %v", p)
				}
				j.res = nil
			}
		}
	}()
	s.run(batch)
}

// bodyReaders are the requests still reading their body; a shutdown sets
// their read deadline to now, so a client that sent headers and part of a
// body cannot make SIGTERM wait for the whole grace period.
type bodyReaders struct {
	mu       sync.Mutex
	closing  bool
	inflight map[*http.ResponseController]struct{}
}

// start registers a body read; it returns false when the server is
// already shutting down.
func (b *bodyReaders) start(rc *http.ResponseController) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	if b.inflight == nil {
		b.inflight = map[*http.ResponseController]struct{}{}
	}
	b.inflight[rc] = struct{}{}
	return true
}

func (b *bodyReaders) done(rc *http.ResponseController) {
	b.mu.Lock()
	delete(b.inflight, rc)
	b.mu.Unlock()
}

// cut ends every body read in progress and refuses new ones.
func (b *bodyReaders) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closing = true
	for rc := range b.inflight {
		rc.SetReadDeadline(time.Now())
	}
}

// isTimeout reports a read that ended at its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
