package lbconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Duration is a time.Duration that reads and writes JSON the way service
// configs spell durations: a string such as "30s" or "1.5m". Protobuf's JSON
// mapping of google.protobuf.Duration ("30s", "0.250s") parses too.
type Duration time.Duration

// UnmarshalJSON accepts a duration string. null leaves the value as it
// is, as encoding/json does for built-in types, so that an explicit null in
// a config keeps the default.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	// Errors are json.UnmarshalTypeErrors so that encoding/json adds the
	// field's path, and the message names the field the user typed.
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf("%s: a duration must be a string such as \"30s\"", shorten(string(b))), Type: durationType}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf("%q: not a duration such as \"30s\"", shorten(s)), Type: durationType}
	}
	*d = Duration(v)
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// shorten keeps an error message about user input readable when the
// input is long: its first 40 bytes and an ellipsis.
func shorten(s string) string {
	const keep = 40
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "…"
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }
