package xdsenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/pickwise/pickwise/interop/server"
)

// Counts is the number of calls each backend served, by name.
type Counts map[string]int

// Total is the sum of the counts.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Share is backend's fraction of the total.
func (c Counts) Share(backend string) float64 {
	if t := c.Total(); t > 0 {
		return float64(c[backend]) / float64(t)
	}
	return 0
}

// String prints the shares in backend order.
func (c Counts) String() string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	for i, n := range names {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%s=%.1f%%", n, 100*c.Share(n))
	}
	return sb.String()
}

// Drive makes calls RPCs over conn from concurrency goroutines. ctxFor, if
// not nil, derives each call's context (for example ringhash.WithKey) from
// its index. It returns which backend served each successful call and the
// first error with the number of failed calls.
func Drive(ctx context.Context, conn grpc.ClientConnInterface, calls, concurrency int, ctxFor func(ctx context.Context, i int) context.Context) (Counts, int, error) {
	var (
		mu       sync.Mutex
		counts   = Counts{}
		failed   int
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				cctx := ctx
				if ctxFor != nil {
					cctx = ctxFor(ctx, i)
				}
				backend, err := server.Call(cctx, conn, fmt.Sprint(i))
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					counts[backend]++
				}
				mu.Unlock()
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	return counts, failed, firstErr
}
