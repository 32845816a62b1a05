package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// Handler returns the introspection page of every pickwise balancer grpc
// built in this process, listed by channel target and policy. A balancer
// leaves the page when grpc closes it.
//
// Query parameters: format=json for JSON; target=T to show only the
// channels whose target contains T.
func Handler() http.Handler { return handler{now: time.Now} }

type handler struct{ now func() time.Time }

// page is the JSON document.
type page struct {
	Time      time.Time             `json:"time"`
	Balancers []engine.BalancerInfo `json:"balancers"`
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "admin: method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	now := h.now()
	bs := engine.Inspect(now)
	if t := q.Get("target"); t != "" {
		kept := bs[:0]
		for _, b := range bs {
			if strings.Contains(b.Target, t) {
				kept = append(kept, b)
			}
		}
		bs = kept
	}
	p := page{Time: now, Balancers: bs}
	w.Header().Set("Cache-Control", "no-store")
	if q.Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(p); err != nil {
			// Nothing is written before the error: the encoder writes a
			// value whole.
			http.Error(w, "admin: "+err.Error(), http.StatusInternalServerError)
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	writeHTML(w, &p, q.Get("fragment") != "")
}
