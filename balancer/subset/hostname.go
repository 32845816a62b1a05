package subset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrHostname is returned by IndexFromHostname for a name without a
// trailing -<number>.
var ErrHostname = errors.New("subset: host name does not end in -<index>")

// IndexFromHostname derives a client index from a StatefulSet-style pod host
// name: "api-7" is index 7. Kubernetes names a StatefulSet's pods
// <set>-0 ... <set>-(replicas-1), which makes the ordinal a free, stable and
// dense clientIndex for the index-based modes. Only the part before the
// first dot is read, so a fully qualified "api-7.api.default.svc" works too.
//
// Names without a trailing -<decimal digits> (a Deployment's random suffix
// "api-7f9c4", a bare "api", "api-", a sign such as "api--1") are rejected
// with ErrHostname rather than guessed at: a wrong index would silently
// unbalance the fleet.
func IndexFromHostname(host string) (int, error) {
	name, _, _ := strings.Cut(host, ".")
	i := strings.LastIndexByte(name, '-')
	// A dash right before the separator reads as a minus sign ("api--1"):
	// no StatefulSet produces it, so it is not an ordinal.
	if i <= 0 || i == len(name)-1 || name[i-1] == '-' {
		return 0, fmt.Errorf("%w: %q", ErrHostname, host)
	}
	digits := name[i+1:]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", ErrHostname, host)
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil { // only overflow is left
		return 0, fmt.Errorf("%w: %q: %v", ErrHostname, host, err)
	}
	return n, nil
}
