package recall

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/render"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// ErrRerankOutput: the reranking model's answer holds no usable ranking.
var ErrRerankOutput = errors.New("stepwise: recall: reranker answer has no ranking")

// DefaultRerankInstructions is the system prompt of LLMReranker.
const DefaultRerankInstructions = `You rank past steps of an AI agent (messages, tool calls and their results, decisions) by how useful they are for the query.
Each candidate is numbered [1], [2], ... Answer with JSON only, no prose: {"ids": [3, 1, 2]}
listing the numbers of the relevant candidates, most relevant first. Leave out irrelevant candidates.`

// DefaultRerankMaxChars bounds the rendering of one candidate in the
// reranking prompt.
const DefaultRerankMaxChars = 1500

// LLMReranker reranks candidates with a model of any provider: the prompt
// lists the candidates, numbered, rendered with render.Steps, and
// asks for an ordered JSON list of numbers. The answer is parsed
// leniently: {"ids": [...]} (or "ranking", "order", "ranked"), a bare
// array, inside a code fence or prose, numbers as numbers or strings
// ("3", "[3]", "#3"); failing JSON, the candidate numbers found in the
// text in order. Numbers out of range and repeats are ignored.
type LLMReranker struct {
	// Model answers the ranking prompt. Required.
	Model llm.Model
	// Instructions are the system prompt. Default DefaultRerankInstructions.
	Instructions string
	// MaxChars bounds each candidate's text. Default DefaultRerankMaxChars.
	MaxChars int
	// DropUnlisted drops the candidates the model did not list. By default
	// they follow the listed ones, in similarity order, so that a model
	// that lists only its top picks does not shrink the result.
	DropUnlisted bool
}

// Rerank implements Reranker.
func (r *LLMReranker) Rerank(ctx context.Context, queries []string, hits []*Hit) ([]*Hit, error) {
	if r.Model == nil {
		return nil, invalid("LLM reranker has no model")
	}
	if len(hits) == 0 {
		return hits, nil
	}
	temp := 0.0
	req := &llm.Request{
		System:      cmp.Or(r.Instructions, DefaultRerankInstructions),
		Messages:    []llm.Message{{Role: steptype.RoleUser, Content: r.prompt(queries, hits)}},
		Temperature: &temp,
	}
	resp, err := llm.Complete(ctx, r.Model, req)
	if err != nil {
		return nil, fmt.Errorf("reranker model %s: %w", r.Model.Name(), err)
	}
	order, err := ParseRanking(resp.Content, len(hits))
	if err != nil {
		return nil, err
	}
	out := make([]*Hit, 0, len(hits))
	used := make([]bool, len(hits))
	for _, n := range order {
		out = append(out, hits[n-1])
		used[n-1] = true
	}
	if !r.DropUnlisted {
		for i, h := range hits {
			if !used[i] {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func (r *LLMReranker) prompt(queries []string, hits []*Hit) string {
	limit := cmp.Or(r.MaxChars, DefaultRerankMaxChars)
	var b strings.Builder
	b.WriteString("Query:\n")
	for _, q := range queries {
		b.WriteString("- " + q + "\n")
	}
	b.WriteString("\nCandidates:\n")
	for i, h := range hits {
		fmt.Fprintf(&b, "\n[%d]\n%s\n", i+1, truncate(render.Steps([]*stepwise.Step{h.Step}), limit))
	}
	fmt.Fprintf(&b, "\nAnswer with JSON only: {\"ids\": [...]} with the numbers (1 to %d) of the relevant candidates, most relevant first.", len(hits))
	return b.String()
}

var (
	fence  = regexp.MustCompile("(?s)```(?:json)?\\s*(.*?)```")
	number = regexp.MustCompile(`\d+`)
)

// ParseRanking reads a ranking of candidates numbered 1..n from a model's
// answer and returns the numbers in order, without repeats or numbers out
// of range. It fails with ErrRerankOutput when the answer names none.
func ParseRanking(text string, n int) ([]int, error) {
	text = truncate(text, 64<<10)
	var out []int
	seen := map[int]bool{}
	add := func(k int) {
		if k >= 1 && k <= n && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	bodies := []string{}
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		bodies = append(bodies, m[1])
	}
	bodies = append(bodies, text)
	for _, body := range bodies {
		if list, ok := jsonList(body); ok {
			for _, v := range list {
				if k, ok := idOf(v); ok {
					add(k)
				}
			}
			if len(out) > 0 {
				return out, nil
			}
		}
	}
	for _, m := range number.FindAllString(text, -1) {
		if k, err := strconv.Atoi(m); err == nil {
			add(k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrRerankOutput, truncate(text, 200))
	}
	return out, nil
}

// jsonList finds the first JSON object or array in s that decodes, and
// returns its list of ids.
// It tries at most 32 starting brackets, so that a long answer full of
// brackets costs linear time.
func jsonList(s string) ([]any, bool) {
	tries := 0
	for i := 0; i < len(s) && tries < 32; i++ {
		if s[i] != '{' && s[i] != '[' {
			continue
		}
		tries++
		var v any
		if err := json.NewDecoder(bytes.NewReader([]byte(s[i:]))).Decode(&v); err != nil {
			continue
		}
		switch t := v.(type) {
		case []any:
			return t, true
		case map[string]any:
			for _, k := range []string{"ids", "ranking", "order", "ranked", "results", "candidates"} {
				if l, ok := t[k].([]any); ok {
					return l, true
				}
			}
		}
	}
	return nil, false
}

// idOf reads a candidate number: 3, "3", "[3]", "#3", {"id": 3}.
func idOf(v any) (int, bool) {
	switch t := v.(type) {
	case float64:
		if t == float64(int(t)) {
			return int(t), true
		}
	case string:
		if m := number.FindString(t); m != "" {
			k, err := strconv.Atoi(m)
			return k, err == nil
		}
	case map[string]any:
		for _, k := range []string{"id", "n", "index", "candidate"} {
			if x, ok := t[k]; ok {
				return idOf(x)
			}
		}
	}
	return 0, false
}
