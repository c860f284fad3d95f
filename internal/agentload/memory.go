package agentload

import (
	"fmt"
	"os"
	"strings"

	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/tool"
)

// Embedder returns the embedder that the agent files ask for
// (embeddings.embedder): the built-in lexical one when none says, the one
// they name when they agree, an error when they differ — a process embeds
// every step with one embedder. "openai:MODEL" uses the declaring file's
// model_options (base_url, api_key_env).
func Embedder(files []string) (recall.Embedder, error) {
	var chosen *agentfile.Spec
	for _, f := range files {
		spec, err := agentfile.Load(f)
		if err != nil {
			return nil, err
		}
		name := spec.Embeddings.Embedder
		switch {
		case name == "":
		case chosen == nil:
			chosen = spec
		case chosen.Embeddings.Embedder != name:
			return nil, fmt.Errorf("%s: embeddings.embedder %q differs from %q in %s: one process embeds with one embedder",
				spec.File, name, chosen.Embeddings.Embedder, chosen.File)
		}
	}
	if chosen == nil {
		return recall.DefaultEmbedder(), nil
	}
	return embedderOf(chosen)
}

// embedderOf builds the embedder a spec names.
func embedderOf(spec *agentfile.Spec) (recall.Embedder, error) {
	name := spec.Embeddings.Embedder
	if model, ok := strings.CutPrefix(name, agentfile.ProviderOpenAI+":"); ok {
		key := os.Getenv("OPENAI_API_KEY")
		if env := spec.ModelOptions.APIKeyEnv; env != "" {
			key = os.Getenv(env)
		}
		e, err := recall.NewOpenAI(recall.OpenAIConfig{Model: model, BaseURL: spec.ModelOptions.BaseURL, APIKey: key})
		if err != nil {
			return nil, fmt.Errorf("%s: embeddings.embedder: %w", spec.File, err)
		}
		return e, nil
	}
	e, err := recall.EmbedderByName(name)
	if err != nil {
		return nil, fmt.Errorf("%s: embeddings.embedder: %w (want %s:DIM or openai:MODEL)", spec.File, err, recall.LexicalName)
	}
	return e, nil
}

// pastStepsSearch builds the past_steps_search tool of a spec: the
// process's embedder, and the LLM reranker of embeddings.reranker.
func pastStepsSearch(spec *agentfile.Spec, o Options) (tool.Tool, error) {
	if o.Store == nil {
		return nil, fmt.Errorf("needs a store")
	}
	emb := o.Embedder
	if emb == nil {
		emb = recall.DefaultEmbedder()
	}
	cfg := recall.ToolConfig{Store: o.Store, Embedder: emb}
	if r := spec.Embeddings.Reranker; r != nil {
		m, err := sideModel(spec, r.Model)
		if err != nil {
			return nil, fmt.Errorf("embeddings.reranker.model: %w", err)
		}
		cfg.Reranker = &recall.LLMReranker{Model: m, DropUnlisted: r.DropUnlisted}
	}
	return recall.NewTool(cfg)
}

// sideModel builds a model other than the agent's (summaries, judges,
// rerankers) with the agent's model_options and no events transport (its
// calls are not steps).
func sideModel(spec *agentfile.Spec, m agentfile.Model) (llm.Model, error) {
	s := *spec
	s.Model = m
	return buildModel(&s, nil)
}

// Model builds a model from a "provider:name" string as the model field of
// an agent file would (a scripted path is relative to the working
// directory), with the provider's default options.
func Model(s string) (llm.Model, error) {
	spec, err := agentfile.Parse("flag", []byte("name: flag\nmodel: "+quoteYAML(s)+"\n"))
	if err != nil {
		return nil, fmt.Errorf("model %q: want provider:name (openai:…, anthropic:…, gemini:…, bedrock:…, scripted:FILE)", s)
	}
	return buildModel(spec, nil)
}

func quoteYAML(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
