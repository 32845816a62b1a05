package testkit

import (
	"context"
	"sync"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
)

// Prober answers load probes at once from a table the test sets, and
// counts them.
type Prober struct {
	mu      sync.Mutex
	answers map[string]engine.LoadAnswer
	sent    map[string]int
}

// NewProber returns a Prober whose endpoints answer nothing until Set.
func NewProber() *Prober {
	return &Prober{answers: map[string]engine.LoadAnswer{}, sent: map[string]int{}}
}

// Set makes addr answer a.
func (p *Prober) Set(addr string, a engine.LoadAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[addr] = a
}

// Sent is how many probes went to addr.
func (p *Prober) Sent(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[addr]
}

// Probe implements engine.LoadProber: the answer set for addr, in the
// caller's goroutine.
func (p *Prober) Probe(_ context.Context, _ balancer.SubConn, addr string, answer func(engine.LoadAnswer)) {
	p.mu.Lock()
	a, ok := p.answers[addr]
	p.sent[addr]++
	p.mu.Unlock()
	if !ok {
		a.Err = context.DeadlineExceeded
	}
	answer(a)
}
