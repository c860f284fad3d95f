package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stepwise-run/stepwise/llm"
)

// Option configures a tool built with [New].
type Option func(*options)

type options struct {
	schema     *jsonschema.Schema
	forOptions *jsonschema.ForOptions
}

// WithSchema replaces the schema inferred from Args. The schema must describe
// an object that decodes into Args; arguments are validated against it.
func WithSchema(s *jsonschema.Schema) Option {
	return func(o *options) { o.schema = s }
}

// WithForOptions passes options to the schema inference (jsonschema.For),
// e.g. TypeSchemas for types that need a hand-written schema.
func WithForOptions(fo *jsonschema.ForOptions) Option {
	return func(o *options) { o.forOptions = fo }
}

// New returns a tool that calls fn with typed arguments.
//
// The parameter schema is inferred from Args (a struct or a map with string
// keys) with github.com/google/jsonschema-go: property names come from `json`
// tags, descriptions from `jsonschema` tags, fields without omitempty or
// omitzero are required, and unknown properties are refused.
//
// Each call validates the arguments against the schema before fn runs; bad
// arguments (missing required field, wrong type, unknown property, malformed
// JSON) give a Result with IsError set whose Content names the field, so the
// model can correct itself. Empty or null arguments count as {}.
//
// The value fn returns is marshalled to JSON as Output; Content is that JSON
// text, or the string itself when Result is a string. An error from fn is
// returned as is (mark it with [Transient] to have it retried). A panic in
// fn is recovered into a Result with IsError set; Output then holds the
// panic value and stack. fn can read the call with [CallFrom].
//
// New panics when Args has no JSON Schema or its schema is not an object:
// that is a programming error, found when the tool is built.
func New[Args, Result any](name, description string, fn func(ctx context.Context, args Args) (Result, error), opts ...Option) Tool {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := o.schema
	if s == nil {
		var err error
		if s, err = jsonschema.For[Args](o.forOptions); err != nil {
			panic(fmt.Sprintf("tool.New %q: infer schema of %v: %v", name, reflect.TypeFor[Args](), err))
		}
	}
	s = s.CloneSchemas()
	if s.Type == "" && len(s.Types) == 0 {
		s.Type = "object" // Args is any: accept any object
	}
	if s.Type != "object" && !slices.Contains(s.Types, "object") {
		panic(fmt.Sprintf("tool.New %q: arguments of %v must be a JSON object, schema is %s", name, reflect.TypeFor[Args](), s))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tool.New %q: marshal schema: %v", name, err))
	}
	v, err := newValidator(s, raw)
	if err != nil {
		panic(fmt.Sprintf("tool.New %q: %v", name, err))
	}
	return &funcTool[Args, Result]{
		def:       llm.ToolDef{Name: name, Description: description, Parameters: raw},
		validator: v,
		flat:      newFlatDecoder(reflect.TypeFor[Args]()),
		fn:        fn,
	}
}

// funcTool is a typed tool; A and R are New's Args and Result.
type funcTool[A, R any] struct {
	def       llm.ToolDef
	validator *Validator
	flat      *flatDecoder // nil: A is not a flat struct
	fn        func(context.Context, A) (R, error)
}

// Definition returns the name, description and inferred schema.
func (t *funcTool[A, R]) Definition() llm.ToolDef { return t.def }

// Call validates and decodes the arguments, then runs the function.
func (t *funcTool[A, R]) Call(ctx context.Context, c *Call) (res *Result, err error) {
	if err := t.validator.Validate(c.Arguments); err != nil {
		return ErrorResult(err), nil
	}
	var args A
	if !t.decodeFlat(c.Arguments, &args) {
		if err := unmarshalArgs(c.Arguments, &args); err != nil {
			return ErrorResult(err), nil
		}
	}
	defer recoverInto(t.def.Name, &res, &err)
	out, err := t.fn(WithCall(ctx, c), args)
	if err != nil {
		return nil, err
	}
	return marshalResult(out)
}

// decodeFlat decodes the arguments into *args (zero) without encoding/json
// when they are plain (see flatDecoder), or reports false and leaves *args
// zero for unmarshalArgs.
func (t *funcTool[A, R]) decodeFlat(raw json.RawMessage, args *A) bool {
	if t.flat == nil {
		return false
	}
	if t.flat.decode(NormalizeArgs(raw), reflect.ValueOf(args).Elem()) {
		return true
	}
	var zero A
	*args = zero
	return false
}

// marshalResult renders a typed result: Output is its JSON, Content the JSON
// text or the string itself.
func marshalResult(v any) (*Result, error) {
	var b []byte
	var buf [20]byte
	switch x := v.(type) {
	// An int or a bool — exactly these types: a named one may marshal
	// itself — is written as encoding/json writes it, without its
	// encoder, in a slice of its size.
	case int:
		b = append([]byte(nil), strconv.AppendInt(buf[:0], int64(x), 10)...)
	case int64:
		b = append([]byte(nil), strconv.AppendInt(buf[:0], x, 10)...)
	case bool:
		b = strconv.AppendBool(nil, x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, Permanent(fmt.Errorf("marshal result: %w", err))
		}
	}
	if s, ok := v.(string); ok {
		return &Result{Content: s, Output: b}, nil
	}
	return &Result{Content: string(b), Output: b}, nil
}

// Func returns a tool from a definition and an untyped function. The
// arguments are validated against def.Parameters before fn runs (an empty
// schema accepts any object), exactly as for [New], and panics in fn are
// recovered into an error result. A nil Result with a nil error is an empty
// result. Func panics when def.Parameters is not a usable JSON Schema.
func Func(def llm.ToolDef, fn func(ctx context.Context, c *Call) (*Result, error)) Tool {
	v, err := NewValidator(def.Parameters)
	if err != nil {
		panic(fmt.Sprintf("tool.Func %q: %v", def.Name, err))
	}
	if len(def.Parameters) == 0 {
		def.Parameters = v.Schema()
	}
	return &untypedTool{def: def, validator: v, fn: fn}
}

type untypedTool struct {
	def       llm.ToolDef
	validator *Validator
	fn        func(context.Context, *Call) (*Result, error)
}

// Definition returns the tool definition given to Func.
func (t *untypedTool) Definition() llm.ToolDef { return t.def }

// Call validates the arguments, then runs the function.
func (t *untypedTool) Call(ctx context.Context, c *Call) (res *Result, err error) {
	if err := t.validator.Validate(c.Arguments); err != nil {
		return ErrorResult(err), nil
	}
	defer recoverInto(t.def.Name, &res, &err)
	res, err = t.fn(WithCall(ctx, c), c)
	if err == nil && res == nil {
		res = &Result{}
	}
	return res, err
}

// ErrorResult returns a result that reports err to the model: Content is the
// error message, Output {"error": message}, IsError set.
func ErrorResult(err error) *Result {
	msg := err.Error()
	out, _ := json.Marshal(map[string]string{"error": msg})
	return &Result{Content: msg, Output: out, IsError: true}
}

// recoverInto turns a panic of a tool function into an error result.
func recoverInto(name string, res **Result, err *error) {
	r := recover()
	if r == nil {
		return
	}
	msg := fmt.Sprintf("tool %q panicked: %v", name, r)
	out, _ := json.Marshal(map[string]string{"error": msg, "stack": string(debug.Stack())})
	*res, *err = &Result{Content: msg, Output: out, IsError: true}, nil
}
