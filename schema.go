package stepwise

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// compileSchema parses and resolves a JSON Schema.
func compileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema: %w", err)
	}
	return r, nil
}

// validateAgainst checks a JSON value against a schema.
func validateAgainst(schema, value json.RawMessage) error {
	r, err := compileSchema(schema)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	return r.Validate(v)
}
