// Package procid tells a goroutine which of the Go scheduler's processors
// (its Ps, GOMAXPROCS of them) it runs on, so that a counter every pick
// advances can be split into one per P: a core then writes a cache line
// that it wrote last itself, where one shared counter's line moves between
// cores on nearly every write, and costs several times as much.
//
// The runtime has no exported way to ask. It exports procPin and procUnpin
// to packages outside the standard library by name (go.dev/issue/67401
// lists them among the functions it promises to keep, with their
// signatures), which is what this package links to. sync.Pool finds its
// per-P shard the same way.
package procid

import (
	_ "unsafe" // for go:linkname
)

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Hint returns the id of the P the calling goroutine runs on, at least 0
// and, as of the call, below runtime.GOMAXPROCS(0). It is a hint: the
// goroutine may move to another P as soon as Hint returns, and GOMAXPROCS
// may change (the runtime follows a container's CPU limit), so whatever a
// caller indexes by it must stay correct when two Ps share it (atomic
// updates), and in range whatever the id (a mask or a modulus).
func Hint() int {
	id := procPin()
	procUnpin()
	return id
}
