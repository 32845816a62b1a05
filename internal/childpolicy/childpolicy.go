// Package childpolicy parses the child policies of pickwise's parent
// policies (pickwise_subset, pickwise_shadow): a loadBalancingConfig list
// read the way grpc reads the channel's own, and the bound on how deep
// parent policies may nest.
package childpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Parents are the names of the policies whose configs hold child configs
// that their parsers decode again: the keys Nesting counts.
var Parents = []string{"pickwise_subset", "pickwise_shadow"}

// errNotList is the error for a child list that is not a list of
// single-key objects; field names the config field.
func errNotList(field string) error {
	return fmt.Errorf(`%s: must be a list like [{"pickwise_p2c": {}}]`, field)
}

// Parse reads a loadBalancingConfig list the way grpc parses the channel's
// own (its internal gracefulswitch.ParseConfig): entries naming
// unregistered policies are skipped, the first registered one is taken
// and its config is checked by its own parser, so that a child's error
// reaches the user with the child's message. field names the config field
// in errors. cfg is nil for a policy without a config parser.
func Parse(field string, b []byte) (name string, cfg serviceconfig.LoadBalancingConfig, err error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return "", nil, errNotList(field)
	}
	var names []string
	for i, entry := range list {
		if len(entry) != 1 {
			return "", nil, fmt.Errorf("%s[%d]: must have exactly one policy name, has %d", field, i, len(entry))
		}
		for name, raw := range entry {
			names = append(names, name)
			builder := balancer.Get(name)
			if builder == nil {
				continue // as in grpc: a later entry is the fallback
			}
			parser, ok := builder.(balancer.ConfigParser)
			if !ok {
				return name, nil, nil
			}
			cfg, err := parser.ParseConfig(raw)
			if err != nil {
				return "", nil, fmt.Errorf("%s %q: %v", field, name, err)
			}
			return name, cfg, nil
		}
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("%s: empty list: must name a policy", field)
	}
	return "", nil, fmt.Errorf("%s: no registered policy among %q (a policy registers when its package is imported)", field, names)
}

// Marshal writes a child as the one-entry list Parse reads, so that a
// parsed config survives a JSON round trip (grpc's xDS cluster resolver
// marshals parsed child configs and parses them again). An empty name is
// null.
func Marshal(name string, cfg serviceconfig.LoadBalancingConfig) ([]byte, error) {
	if name == "" {
		return []byte("null"), nil
	}
	raw := json.RawMessage("{}")
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	return json.Marshal([]map[string]json.RawMessage{{name: raw}})
}

// IsNull reports whether b is JSON null, which keeps a child's default.
func IsNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// TooDeep reports whether js nests more than limit parent configs. Every
// level below the first is an object key, spelled out in js unless
// escapes spell it, so a config with fewer than limit occurrences of the
// names and no \u escape is settled by a fast byte search; the others,
// rare, are read token by token.
func TooDeep(js []byte, limit int) bool {
	count := 0
	for _, p := range Parents {
		count += bytes.Count(js, []byte(p))
	}
	if count < limit && !bytes.Contains(js, []byte(`\u`)) {
		return false
	}
	return Nesting(js, limit) > limit
}

// Nesting returns how many parent configs js holds along its deepest
// path, js itself counting as one: the number of object keys naming a
// parent on the way, wherever they are (another policy between two
// parents does not break the chain, since grpc's registry still hands
// each parent its child's JSON to decode again). It stops once the count
// passes limit. For malformed JSON it returns what it counted before the
// error, and the decoder reports the error.
func Nesting(js []byte, limit int) int {
	type frame struct {
		object  bool // false: a list
		wantKey bool // in an object, the next token is a key
		level   int  // the parent configs enclosing this value
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	var stack []frame
	next, deepest := 1, 1 // next: the level of the next value
	for deepest <= limit {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			top := &stack[n-1]
			if key, ok := tok.(string); ok {
				top.wantKey = false
				next = top.level
				if isParent(key) {
					next++
					deepest = max(deepest, next)
				}
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true, level: next})
			continue
		case json.Delim('['):
			stack = append(stack, frame{level: next})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: an object's next token is a key, a list's next
		// element is at the list's level.
		if n := len(stack); n > 0 {
			stack[n-1].wantKey = stack[n-1].object
			next = stack[n-1].level
		}
	}
	return deepest
}

func isParent(key string) bool {
	for _, p := range Parents {
		if key == p {
			return true
		}
	}
	return false
}
