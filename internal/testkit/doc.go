// Package testkit holds test helpers shared by every pickwise package: a
// fake balancer.ClientConn whose SubConns the test drives by hand, so a
// policy's pickers can be examined without a network, and helpers to count
// picks. The fake itself is package fakecc's, named here under aliases:
// testkit imports testing, which a program such as the simulator must not
// link.
package testkit
