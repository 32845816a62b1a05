// Package fakecc holds a fake balancer.ClientConn, the SubConns it hands
// out and a metrics recorder: enough for a real balancer to run with no
// network while its caller decides when each connection changes state.
//
// The unit tests use it through package testkit, and the simulator drives
// every policy it measures through it in virtual time. It imports no
// testing package, so that the simulator and the lab, which are ordinary
// programs, do not link the test framework and its flags.
package fakecc
