package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pickwise/pickwise/admin"
	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
)

// discard is a ResponseWriter that keeps nothing, so that the benchmark
// measures the handler, not a recorder's buffer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkHandler measures one reading of the page, JSON and HTML, of
// one balancer over n endpoints that have placed calls.
func BenchmarkHandler(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		p, closeFn := testkit.ReadyPicker(b, p2c.Name, `{}`, n)
		for range 4 * n {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				b.Fatal(err)
			}
			res.Done(balancer.DoneInfo{})
		}
		h := admin.Handler()
		for _, format := range []string{"json", "html"} {
			b.Run(fmt.Sprintf("n=%d/format=%s", n, format), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/?format="+format, nil)
				w := &discard{h: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					h.ServeHTTP(w, req)
				}
			})
		}
		closeFn()
	}
}
