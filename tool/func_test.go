package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

type weatherArgs struct {
	City  string   `json:"city" jsonschema:"the city name"`
	Days  int      `json:"days,omitempty" jsonschema:"number of days to forecast"`
	Tags  []string `json:"tags,omitempty"`
	Units *units   `json:"units,omitempty"`
}

type units struct {
	Temp string `json:"temp"`
}

type forecast struct {
	City string `json:"city"`
	Days int    `json:"days"`
}

// newWeather returns a typed tool and a counter of how often fn ran.
func newWeather(t *testing.T) (tool.Tool, *int) {
	t.Helper()
	calls := new(int)
	return tool.New("weather", "Forecast for a city.", func(ctx context.Context, a weatherArgs) (forecast, error) {
		*calls++
		return forecast{City: a.City, Days: a.Days}, nil
	}), calls
}

func call(t *testing.T, tl tool.Tool, args string) (*tool.Result, error) {
	t.Helper()
	return tl.Call(context.Background(), &tool.Call{ID: "c1", Name: tl.Definition().Name, Arguments: json.RawMessage(args)})
}

func TestNewSchema(t *testing.T) {
	t.Parallel()
	tl, _ := newWeather(t)
	def := tl.Definition()
	if def.Name != "weather" || def.Description != "Forecast for a city." {
		t.Fatalf("def = %+v", def)
	}
	var s struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if err := json.Unmarshal(def.Parameters, &s); err != nil {
		t.Fatalf("parameters %s: %v", def.Parameters, err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "city" {
		t.Errorf("type/required wrong: %s", def.Parameters)
	}
	if s.Properties["city"].Description != "the city name" || s.Properties["days"].Description != "number of days to forecast" {
		t.Errorf("descriptions not taken from jsonschema tags: %s", def.Parameters)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("unknown properties allowed: %s", def.Parameters)
	}
}

func TestNewCall(t *testing.T) {
	t.Parallel()
	tl, calls := newWeather(t)
	res, err := call(t, tl, `{"city":"Oslo","days":3}`)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content != `{"city":"Oslo","days":3}` || string(res.Output) != res.Content {
		t.Errorf("result = %+v", res)
	}
	if *calls != 1 {
		t.Errorf("fn ran %d times", *calls)
	}
}

func TestNewStringResult(t *testing.T) {
	t.Parallel()
	tl := tool.New("greet", "", func(ctx context.Context, a struct {
		Name string `json:"name"`
	}) (string, error) {
		return "hello " + a.Name, nil
	})
	res, err := call(t, tl, `{"name":"Ada"}`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "hello Ada" || string(res.Output) != `"hello Ada"` {
		t.Errorf("result = %q / %s", res.Content, res.Output)
	}
}

func TestNewBadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, args string
		want       []string // substrings of the message
	}{
		{"missing required", `{"days":2}`, []string{`"city"`, "required"}},
		{"wrong type", `{"city":42}`, []string{`"city"`, "must be string", "integer 42"}},
		{"fraction for int", `{"city":"x","days":1.5}`, []string{`"days"`, "must be integer"}},
		{"int overflow", `{"city":"x","days":1e300}`, []string{`"days"`, "int"}},
		{"unknown property", `{"city":"x","bogus":1}`, []string{`"bogus"`, "not allowed", `"city"`}},
		{"case matters", `{"City":"x"}`, []string{`"city"`, "required"}},
		{"nested", `{"city":"x","units":{"temp":1}}`, []string{`"units.temp"`, "must be string"}},
		{"array item", `{"city":"x","tags":["a",7]}`, []string{`"tags[1]"`, "must be string"}},
		{"not an object", `[1,2]`, []string{"must be a JSON object", "array"}},
		{"malformed", `{"city":`, []string{"not valid JSON"}},
		{"null means {}", `null`, []string{`"city"`, "required"}},
		{"empty means {}", ``, []string{`"city"`, "required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl, calls := newWeather(t)
			res, err := call(t, tl, tc.args)
			if err != nil {
				t.Fatalf("Go error %v, want an error result", err)
			}
			if !res.IsError {
				t.Fatalf("IsError not set: %+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("message %q lacks %q", res.Content, w)
				}
			}
			if *calls != 0 {
				t.Errorf("fn ran on bad arguments")
			}
		})
	}
}

func TestNewNoArguments(t *testing.T) {
	t.Parallel()
	tl := tool.New("now", "", func(ctx context.Context, _ struct{}) (int, error) { return 7, nil })
	for _, args := range []string{``, `null`, `{}`, " {} "} {
		res, err := call(t, tl, args)
		if err != nil || res.IsError || res.Content != "7" {
			t.Errorf("args %q: %+v, %v", args, res, err)
		}
	}
	res, _ := call(t, tl, `{"x":1}`)
	if !res.IsError || !strings.Contains(res.Content, "no fields are accepted") {
		t.Errorf("unknown field on empty struct: %+v", res)
	}
}

func TestNewErrorKeepsClass(t *testing.T) {
	t.Parallel()
	boom := errors.New("upstream busy")
	tl := tool.New("flaky", "", func(ctx context.Context, _ struct{}) (string, error) {
		return "", tool.Transient(boom)
	})
	res, err := call(t, tl, `{}`)
	if res != nil || !errors.Is(err, boom) {
		t.Fatalf("got %+v, %v", res, err)
	}
	if c := llm.Classify(err); c != steptype.ErrorTransient {
		t.Errorf("class = %q", c)
	}
}

func TestNewPanicRecovered(t *testing.T) {
	t.Parallel()
	tl := tool.New("bad", "", func(ctx context.Context, a struct {
		N int `json:"n"`
	}) (int, error) {
		var m map[string]int
		m["x"] = a.N //lint:ignore SA5000 the test wants this panic
		return 0, nil
	})
	res, err := call(t, tl, `{"n":1}`)
	if err != nil {
		t.Fatalf("panic became Go error %v", err)
	}
	if !res.IsError || !strings.Contains(res.Content, `tool "bad" panicked`) || !strings.Contains(res.Content, "nil map") {
		t.Errorf("result = %+v", res)
	}
	var out struct{ Stack string }
	if json.Unmarshal(res.Output, &out); !strings.Contains(out.Stack, "func_test.go") {
		t.Errorf("output lacks the stack: %s", res.Output)
	}
}

func TestNewUnmarshalableResult(t *testing.T) {
	t.Parallel()
	tl := tool.New("nan", "", func(ctx context.Context, _ struct{}) (float64, error) { return math.NaN(), nil })
	res, err := call(t, tl, `{}`)
	if res != nil || err == nil || llm.Classify(err) != steptype.ErrorPermanent {
		t.Errorf("got %+v, %v; want a permanent error", res, err)
	}
}

func TestNewCallFrom(t *testing.T) {
	t.Parallel()
	tl := tool.New("key", "", func(ctx context.Context, _ struct{}) (string, error) {
		c, ok := tool.CallFrom(ctx)
		if !ok {
			return "", errors.New("no call in context")
		}
		return c.IdempotencyKey, nil
	})
	res, err := tl.Call(context.Background(), &tool.Call{Name: "key", IdempotencyKey: "run1/4/c9"})
	if err != nil || res.Content != "run1/4/c9" {
		t.Errorf("got %+v, %v", res, err)
	}
	if _, ok := tool.CallFrom(context.Background()); ok {
		t.Error("CallFrom found a call in an empty context")
	}
}

func TestNewWithSchema(t *testing.T) {
	t.Parallel()
	s := &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"n": {Type: "integer", Minimum: jsonschema.Ptr(1.0)}},
		Required:   []string{"n"},
	}
	tl := tool.New("pos", "", func(ctx context.Context, a map[string]int) (int, error) { return a["n"], nil }, tool.WithSchema(s))
	if res, _ := call(t, tl, `{"n":5}`); res.IsError || res.Content != "5" {
		t.Errorf("valid call: %+v", res)
	}
	res, _ := call(t, tl, `{"n":0}`)
	if !res.IsError || !strings.Contains(res.Content, "minimum") || !strings.Contains(res.Content, "/properties/n") {
		t.Errorf("minimum not enforced or not explained: %+v", res)
	}
	if s.Type != "object" || len(s.Properties) != 1 {
		t.Error("WithSchema modified the caller's schema")
	}
}

func TestNewPanicsOnNonObjectArgs(t *testing.T) {
	t.Parallel()
	for name, build := range map[string]func(){
		"string args": func() {
			tool.New("s", "", func(ctx context.Context, a string) (string, error) { return a, nil })
		},
		"func field": func() {
			tool.New("f", "", func(ctx context.Context, a struct{ F func() }) (string, error) { return "", nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Error("New did not panic")
				}
			}()
			build()
		})
	}
}

func TestFunc(t *testing.T) {
	t.Parallel()
	def := llm.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
	tl := tool.Func(def, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return nil, err
		}
		if a.Text == "panic" {
			panic("asked to")
		}
		if a.Text == "nil" {
			return nil, nil
		}
		return &tool.Result{Content: a.Text}, nil
	})
	if res, err := call(t, tl, `{"text":"hi"}`); err != nil || res.Content != "hi" {
		t.Errorf("call: %+v, %v", res, err)
	}
	if res, err := call(t, tl, `{"text":3}`); err != nil || !res.IsError || !strings.Contains(res.Content, `"text"`) {
		t.Errorf("bad arguments: %+v, %v", res, err)
	}
	if res, err := call(t, tl, `{"text":"panic"}`); err != nil || !res.IsError || !strings.Contains(res.Content, "asked to") {
		t.Errorf("panic: %+v, %v", res, err)
	}
	if res, err := call(t, tl, `{"text":"nil"}`); err != nil || res == nil || res.IsError {
		t.Errorf("nil result: %+v, %v", res, err)
	}
}

func TestFuncEmptySchema(t *testing.T) {
	t.Parallel()
	tl := tool.Func(llm.ToolDef{Name: "any"}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: string(c.Arguments)}, nil
	})
	if p := string(tl.Definition().Parameters); p != `{"type":"object"}` {
		t.Errorf("parameters = %s", p)
	}
	if res, _ := call(t, tl, `{"anything":[1]}`); res.IsError {
		t.Errorf("empty schema refused an object: %+v", res)
	}
	if res, _ := call(t, tl, `"str"`); !res.IsError {
		t.Error("empty schema accepted a non-object")
	}
}

func TestFuncPanicsOnBadSchema(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Func accepted a malformed schema")
		}
	}()
	tool.Func(llm.ToolDef{Name: "x", Parameters: json.RawMessage(`{"type":`)}, nil)
}
