package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/pickwise/pickwise/admin"
)

// Mount the page on a debug server's mux, beside pprof or channelz. Here
// the server is a test one, and the process runs no channel, so the page
// lists no balancer.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("/debug/pickwise", admin.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/debug/pickwise?format=json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var page struct {
		Balancers []json.RawMessage `json:"balancers"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Header.Get("Content-Type"), len(page.Balancers), "balancers")
	// Output: application/json 0 balancers
}
