package shadow

import "sync"

// queue serializes every call into the children. grpc serializes its own
// calls into a balancer, but the shadow also calls its children from a
// goroutine of its own (replays of a shared SubConn's state, which must not
// run inside the child call that asked for them: the child may hold its
// own lock there). Every call into a child therefore runs under mu, either
// directly from grpc's call (run) or from the queue's goroutine
// (schedule), in the order scheduled.
type queue struct {
	mu sync.Mutex // held while a child's code runs

	pendingMu sync.Mutex
	pending   []func()
	wake      chan struct{} // one slot: the goroutine has work
	done      chan struct{} // closed when the goroutine has stopped
	stopped   bool
}

func newQueue() *queue {
	q := &queue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// run calls f under mu, on the caller's goroutine.
func (q *queue) run(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
}

// schedule queues f to run under mu on the queue's goroutine. It never
// blocks, so it may be called from anywhere, a child's code included.
// After stop it drops f.
func (q *queue) schedule(f func()) {
	q.pendingMu.Lock()
	if q.stopped {
		q.pendingMu.Unlock()
		return
	}
	q.pending = append(q.pending, f)
	select {
	case q.wake <- struct{}{}: // under pendingMu: stop closes wake under it
	default:
	}
	q.pendingMu.Unlock()
}

func (q *queue) loop() {
	defer close(q.done)
	for range q.wake {
		for {
			q.pendingMu.Lock()
			if q.stopped {
				q.pendingMu.Unlock()
				return
			}
			if len(q.pending) == 0 {
				q.pendingMu.Unlock()
				break
			}
			f := q.pending[0]
			q.pending[0] = nil
			q.pending = q.pending[1:]
			q.pendingMu.Unlock()
			q.run(f)
		}
	}
}

// stop drops what is queued and ends the goroutine, waiting for it unless
// the caller holds mu (Close runs under it): the goroutine then stops once
// it gets mu, before running anything more.
func (q *queue) stop(wait bool) {
	q.pendingMu.Lock()
	if !q.stopped {
		q.stopped = true
		q.pending = nil
		close(q.wake)
	}
	q.pendingMu.Unlock()
	if wait {
		<-q.done
	}
}
