package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/tool"
)

// ExampleNew builds a typed tool: the schema comes from the arguments struct,
// and bad arguments become an error result the model can read.
func ExampleNew() {
	type Args struct {
		City string `json:"city" jsonschema:"city to look up"`
		Days int    `json:"days,omitempty" jsonschema:"days ahead, default 1"`
	}
	type Forecast struct {
		City    string `json:"city"`
		Summary string `json:"summary"`
	}
	weather := tool.New("weather", "Weather forecast for a city.",
		func(ctx context.Context, a Args) (Forecast, error) {
			return Forecast{City: a.City, Summary: fmt.Sprintf("sunny for %d day(s)", max(a.Days, 1))}, nil
		})

	fmt.Println(string(weather.Definition().Parameters))

	res, _ := weather.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"city":"Oslo","days":2}`)})
	fmt.Println(res.Content)

	res, _ = weather.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"town":"Oslo"}`)})
	fmt.Println(res.IsError, res.Content)
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"city to look up"},"days":{"type":"integer","description":"days ahead, default 1"}},"required":["city"],"additionalProperties":false}
	// {"city":"Oslo","summary":"sunny for 2 day(s)"}
	// true invalid arguments: field "city" is required
}

// ExampleSet collects tools under unique names for a model request.
func ExampleSet() {
	upper := tool.New("upper", "Upper-cases text.", func(ctx context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return strings.ToUpper(a.Text), nil
	})
	set, err := tool.NewSet(upper)
	if err != nil {
		panic(err)
	}
	fmt.Println(set.Add(upper))

	res, _ := set.Call(context.Background(), &tool.Call{Name: "upper", Arguments: json.RawMessage(`{"text":"hi"}`)})
	fmt.Println(res.Content)
	// Output:
	// stepwise: duplicate tool name "upper"
	// HI
}
