// Package strictjson decodes JSON config objects strictly: unknown fields
// and trailing data are errors, and the messages name the JSON field a
// user typed rather than Go types.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode unmarshals data into v and rejects unknown fields and
// trailing data. A misspelt field in a service config ("choicecount" is
// fine, "choiceCounts" is not) is a silent misconfiguration otherwise, and
// grpc only surfaces parse errors, so we make them loud.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cleanJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the config object")
	}
	return nil
}

// cleanJSONError rewrites encoding/json's messages, which name Go types,
// into ones that name the JSON field a user typed.
func cleanJSONError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field != "" {
			return fmt.Errorf("field %q: cannot use JSON %s", typeErr.Field, typeErr.Value)
		}
		return fmt.Errorf("cannot use JSON %s here", typeErr.Value)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", rest)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}
