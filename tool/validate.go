package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stepwise-run/stepwise/steptype"
)

// ArgumentError reports tool arguments that do not match the tool's schema.
// Its message is written for the model, which reads it as the tool result
// and can correct its call. It matches [ErrInvalidArguments] and is permanent.
type ArgumentError struct {
	// Field is the path of the offending field ("city", "items[2].name"),
	// empty when the problem is the arguments as a whole.
	Field string
	// Problem says what is wrong with Field, e.g. "is required".
	Problem string
}

// Error renders the problem for the model, e.g.
// `invalid arguments: field "city" is required`.
func (e *ArgumentError) Error() string {
	if e.Field == "" {
		return "invalid arguments: " + e.Problem
	}
	return fmt.Sprintf("invalid arguments: field %q %s", e.Field, e.Problem)
}

// Is reports whether target is [ErrInvalidArguments].
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArguments }

// ErrorClass reports that bad arguments are never worth retrying as is.
func (e *ArgumentError) ErrorClass() steptype.ErrorClass { return steptype.ErrorPermanent }

// Validator checks tool arguments against a resolved JSON Schema (draft
// 2020-12 or draft-07). Resolve a schema once with [NewValidator] and reuse
// the Validator; it is safe for concurrent use.
type Validator struct {
	schema   json.RawMessage
	resolved *jsonschema.Resolved
	// fast is the schema compiled for the allocation-free check of valid
	// arguments; nil when the schema uses keywords outside its subset.
	fast *fastNode
}

// NewValidator resolves schema. An empty schema means any object. It fails
// (wrapping [ErrInvalidSchema]) when the schema is not valid JSON Schema or
// has references it cannot resolve locally.
func NewValidator(schema json.RawMessage) (*Validator, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return newValidator(&s, schema)
}

func newValidator(s *jsonschema.Schema, raw json.RawMessage) (*Validator, error) {
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &Validator{schema: raw, resolved: r, fast: compileFast(s, 0)}, nil
}

// Schema returns the schema the validator was built from.
func (v *Validator) Schema() json.RawMessage { return v.schema }

// Validate checks args, the arguments object as the model sent it. Empty
// arguments and JSON null count as the empty object {}, since models send
// them for tools without parameters. The error, if any, is an
// [*ArgumentError] naming the first offending field.
func (v *Validator) Validate(args json.RawMessage) error {
	if v.fast != nil && v.fast.fastValid(NormalizeArgs(args)) {
		// Certainly valid: no decode, no allocation. Anything else (bad
		// arguments, or a case the fast check leaves open) goes through
		// the full validator, which decides and explains.
		return nil
	}
	var inst any
	if err := json.Unmarshal(NormalizeArgs(args), &inst); err != nil {
		return &ArgumentError{Problem: "arguments are not valid JSON: " + err.Error()}
	}
	err := v.resolved.Validate(inst)
	if err == nil {
		return nil
	}
	if ae := explain(v.resolved.Schema(), inst, ""); ae != nil {
		return ae
	}
	// The explainer does not cover every keyword (patterns, ranges,
	// combinators); fall back to the validator's own message, which names
	// the schema location.
	return &ArgumentError{Problem: strings.TrimPrefix(err.Error(), "validating root: ")}
}

// ValidateArgs checks args against schema in one go; see [Validator.Validate].
// It returns an [*ArgumentError] for bad arguments and an error wrapping
// [ErrInvalidSchema] for a bad schema. Build a [Validator] instead when
// checking many calls against one schema.
func ValidateArgs(schema, args json.RawMessage) error {
	v, err := NewValidator(schema)
	if err != nil {
		return err
	}
	return v.Validate(args)
}

// NormalizeArgs returns args with surrounding space removed, and empty
// arguments or JSON null replaced by {}.
func NormalizeArgs(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return t
}

// unmarshalArgs decodes validated arguments into a Go value, reporting a
// failure (an integer overflow, 1.5 for an int) as an *ArgumentError.
func unmarshalArgs(args json.RawMessage, dst any) error {
	err := json.Unmarshal(NormalizeArgs(args), dst)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		return &ArgumentError{Field: field, Problem: fmt.Sprintf("must be a valid %s, got %s", te.Type, te.Value)}
	}
	return &ArgumentError{Problem: err.Error()}
}
