package engine

import (
	"errors"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
)

// countingPicker answers every pick with res and counts the picks.
type countingPicker struct {
	res   balancer.PickResult
	err   error
	picks int
}

func (p *countingPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	p.picks++
	return p.res, p.err
}

// namedSubConn is a SubConn told apart by its name.
type namedSubConn struct {
	balancer.SubConn
	name string
}

// TestPickChild follows one endpoint's child through its states under an
// eager and a lazy policy: a READY picker that answers with a SubConn
// alone is asked once, when it arrives, and its SubConn placed from then
// on; one that answers with more (a Done) is asked on every pick; when the
// child leaves READY, an eager policy's picks still go to the last READY
// connection (until the next snapshot drops the endpoint), and a lazy
// policy's follow the child's latest picker.
func TestPickChild(t *testing.T) {
	a, b := &namedSubConn{name: "a"}, &namedSubConn{name: "b"}
	for _, lazy := range []bool{false, true} {
		e := newEndpoint("x", nil, false)
		report := func(st connectivity.State, p balancer.Picker) {
			e.live.set(p)
			e.followChild(st, p, lazy)
		}
		if _, err := e.pickChild(balancer.PickInfo{}); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			t.Fatalf("lazy %v: before any picker: %v, want the call queued", lazy, err)
		}

		first := &countingPicker{res: balancer.PickResult{SubConn: a}}
		report(connectivity.Ready, first)
		for range 3 {
			if res, err := e.pickChild(balancer.PickInfo{}); err != nil || res.SubConn != a || res.Done != nil {
				t.Fatalf("lazy %v: READY: %v, %v, want a alone", lazy, res, err)
			}
		}
		if first.picks != 1 {
			t.Errorf("lazy %v: the READY picker was asked %d times, want once, when it came", lazy, first.picks)
		}

		// A new READY picker (pickfirst moved to another address) is
		// followed at once, without a new snapshot.
		withDone := &countingPicker{res: balancer.PickResult{SubConn: b, Done: func(balancer.DoneInfo) {}}}
		report(connectivity.Ready, withDone)
		for range 3 {
			if res, err := e.pickChild(balancer.PickInfo{}); err != nil || res.SubConn != b || res.Done == nil {
				t.Fatalf("lazy %v: READY with a Done: %v, %v, want b and its Done", lazy, res, err)
			}
		}
		if withDone.picks != 4 {
			t.Errorf("lazy %v: a READY picker with a Done was asked %d times, want 4: once when it came, then every pick", lazy, withDone.picks)
		}

		// Metadata, or an error, is more than a SubConn alone too.
		tagged := &countingPicker{res: balancer.PickResult{SubConn: b, Metadata: metadata.Pairs("k", "v")}}
		report(connectivity.Ready, tagged)
		if res, err := e.pickChild(balancer.PickInfo{}); err != nil || res.SubConn != b || res.Metadata.Len() != 1 || tagged.picks != 2 {
			t.Fatalf("lazy %v: READY with metadata: %v, %v, asked %d times; want b, its metadata, and the picker asked again", lazy, res, err, tagged.picks)
		}
		refusing := &countingPicker{err: balancer.ErrNoSubConnAvailable}
		report(connectivity.Ready, refusing)
		if _, err := e.pickChild(balancer.PickInfo{}); !errors.Is(err, balancer.ErrNoSubConnAvailable) || refusing.picks != 2 {
			t.Fatalf("lazy %v: READY picker that errs: %v, asked %d times; want its error, asked again", lazy, err, refusing.picks)
		}
		report(connectivity.Ready, withDone)

		failing := &countingPicker{err: errors.New("connection refused")}
		report(connectivity.TransientFailure, failing)
		res, err := e.pickChild(balancer.PickInfo{})
		switch {
		case lazy && (err == nil || failing.picks != 1):
			t.Errorf("lazy: TRANSIENT_FAILURE: %v, %v (failing picker asked %d times), want the child's error", res, err, failing.picks)
		case !lazy && (err != nil || res.SubConn != b || failing.picks != 0):
			t.Errorf("eager: TRANSIENT_FAILURE: %v, %v (failing picker asked %d times), want the last READY connection b", res, err, failing.picks)
		}
	}
}
