package engine

import (
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/internal/evidence"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/serviceconfig"
)

// benchCC is the ClientConn of a balancer assembled without
// endpointsharding: it only takes pickers.
type benchCC struct {
	balancer.ClientConn
	updates int
}

func (c *benchCC) UpdateState(balancer.State) { c.updates++ }

// nopPolicy builds a picker over the snapshot without work of its own, so
// that the benchmark measures the engine's side of a health tick.
type nopPolicy struct{}

func (nopPolicy) Configure(serviceconfig.LoadBalancingConfig) (Settings, error) {
	return Settings{}, nil
}
func (nopPolicy) NewPicker(s *Snapshot) balancer.Picker { return fixedPicker{} }

// healthBalancer is an engine balancer over n READY endpoints with skewed
// weights (1 to 1000), assembled directly: bringing 50k endpoints up
// through endpointsharding is a cost of its own, measured elsewhere.
func healthBalancer(n int) (*engineBalancer, *benchCC) {
	cc := &benchCC{}
	b := &engineBalancer{name: "bench", mode: eager{}, cc: cc, clock: SystemClock{}, rand: SystemRand{}, policy: nopPolicy{}}
	b.shared.clock = b.clock
	b.pub = publisher{b: b}
	b.pub.coalesce.published = noStateYet
	b.ejection = ejection{name: b.name, clock: b.clock, shared: &b.shared, locked: b.locked, order: &b.order,
		changed: b.pub.ejectionChanged, publish: b.pub.publish}
	pen := newPenalty(DefaultFailurePenalty())
	b.shared.penalty.Store(pen)
	b.shared.ejector.Store(newEjector(DefaultEjection(), pen))
	for i := 0; i < n; i++ {
		e := newEndpoint(fmt.Sprint(i), &b.shared, false)
		e.state, e.weight, e.pos = connectivity.Ready, float64(1+i%1000), i
		e.picker = fixedPicker{}
		b.order = append(b.order, e)
	}
	return b, cc
}

// BenchmarkHealthTick is one health tick (decay, fleet rate, ejection
// decisions) over n endpoints, with 1% of them failing now and then: with
// nothing to eject, and with one black hole that is ejected (and a picker
// published) on every tick.
func BenchmarkHealthTick(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("n=%d/change=none", n), func(b *testing.B) {
			bal, _ := healthBalancer(n)
			for i := 0; i < n; i += 100 {
				bal.order[i].outcomeBits.Store(evidence.Counts{Failures: 1, Total: 10}.Pack())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bal.mu.Lock()
				bal.ejection.assess(1, bal.clock.Nanotime()) // no decay: the counts stay as set
				bal.mu.Unlock()
			}
		})
		b.Run(fmt.Sprintf("n=%d/change=eject", n), func(b *testing.B) {
			bal, cc := healthBalancer(n)
			pen := bal.shared.penalty.Load()
			for i := 0; i < n; i += 100 {
				bal.order[i].outcomeBits.Store(evidence.Counts{Failures: 1, Total: 10}.Pack())
			}
			hole := bal.order[n/2]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hole.ejection = ejectionState{}
				hole.outcomeBits.Store(evidence.Counts{Failures: 10, Total: 10}.Pack())
				bal.mu.Lock()
				bal.ejection.assess(pen.decay, bal.clock.Nanotime())
				bal.mu.Unlock()
			}
			b.StopTimer()
			if !hole.ejection.ejected || cc.updates == 0 {
				b.Fatalf("the black hole was not ejected (%d pickers published)", cc.updates)
			}
		})
	}
}
