package engine

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// errPicker fails every pick with err. err must not be a status error:
// grpc ends even wait-for-ready RPCs on a status error, while a plain error
// lets them wait for the next picker.
type errPicker struct{ err error }

func (p errPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}

// ErrPicker returns a picker that fails every pick with err, for a policy
// that cannot build its own picker (err must not be a status error, see
// errPicker).
func ErrPicker(err error) balancer.Picker { return errPicker{err: err} }

// noReadyPicker defers to the picker of an endpoint's child while no
// endpoint is READY: it queues RPCs while endpoints connect and, when they
// all failed, names the policy in the connection error the RPC fails with.
type noReadyPicker struct {
	name  string
	total int
	state connectivity.State
	child balancer.Picker
}

func (p *noReadyPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := p.child.Pick(info)
	if err == nil || errors.Is(err, balancer.ErrNoSubConnAvailable) {
		return res, err
	}
	if _, isStatus := status.FromError(err); isStatus {
		return res, err
	}
	return res, fmt.Errorf("%s: none of %d endpoints is READY (%v): %w", p.name, p.total, p.state, err)
}
