package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/stepwise-run/stepwise/llm"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/telemetry"
)

// runtime is an open store, an engine over it and the agent files loaded
// into it.
type runtime struct {
	eng    *stepwise.Engine
	st     store.Store
	loaded []*agentload.Loaded
	memory *recall.Worker // embeds committed steps in the background
	stop   []func()       // observers to flush and stop on Close
	judges *eval.Judges   // the agent files' judges, for judging on demand (observe.go)
	// embedder embeds the steps and the search queries: the agent files'
	// embeddings.embedder, else the built-in lexical one.
	embedder recall.Embedder
}

// Close stops the engine and releases the agents' and store's resources.
func (r *runtime) Close() error {
	for _, stop := range r.stop {
		stop()
	}
	errs := []error{r.eng.Close()}
	if r.memory != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, r.memory.Stop(ctx))
		cancel()
	}
	for _, l := range r.loaded {
		errs = append(errs, l.Close())
	}
	errs = append(errs, r.st.Close())
	return errors.Join(errs...)
}

// agentName resolves an --agent value: the name of the agent loaded from a
// file, or the value itself (a registered agent name, or "" for "the
// session's agent").
func (r *runtime) agentName(arg string) string {
	if looksLikeFile(arg) && len(r.loaded) > 0 {
		return r.loaded[0].Agent.Name
	}
	return arg
}

// open opens the store and an engine with the built-in agents plus the
// agent file in agentArg (when it names a file).
func (e *env) open(ctx context.Context, agentArg string, moreFiles ...string) (*runtime, error) {
	st, err := openStore(ctx, e.db, false)
	if err != nil {
		return nil, err
	}
	r := &runtime{st: st}
	agents, prices, err := e.agents(ctx, r, agentArg, moreFiles...)
	if err != nil {
		for _, l := range r.loaded {
			_ = l.Close()
		}
		st.Close()
		return nil, err
	}
	eng, err := stepwise.New(stepwise.Config{Store: st, Agents: agents, Prices: prices, Lease: e.lease, NoStepResources: e.noStepRes})
	if err != nil {
		st.Close()
		return nil, err
	}
	r.eng = eng
	kinds := map[string][]steptype.Kind{}
	for _, l := range r.loaded {
		for name, o := range l.Observed {
			if o.EmbedKinds != nil {
				kinds[name] = o.EmbedKinds
			}
		}
	}
	if w, err := recall.NewWorker(recall.WorkerConfig{Store: st, Embedder: r.embedder, AgentKinds: kinds}); err == nil {
		w.Attach(eng)
		if w.Start(context.WithoutCancel(ctx)) == nil {
			r.memory = w
		}
	}
	if err := r.observe(ctx, e.events); err != nil {
		r.Close()
		return nil, err
	}
	if arg := r.agentName(agentArg); arg != "" {
		if _, err := eng.Agent(arg); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// agents returns the built-in agents and the agent file's, with prices.
func (e *env) agents(ctx context.Context, r *runtime, agentArg string, moreFiles ...string) ([]*stepwise.Agent, llm.PriceTable, error) {
	a, err := demo.Agents(demo.Options{})
	if err != nil {
		return nil, nil, err
	}
	op, err := demo.Operator(demo.Options{})
	if err != nil {
		return nil, nil, err
	}
	agents := []*stepwise.Agent{a, op}
	prices := llm.DefaultPrices()
	files := moreFiles
	if looksLikeFile(agentArg) {
		files = append([]string{agentArg}, files...)
	}
	emb, err := agentload.Embedder(files)
	if err != nil {
		return nil, nil, err
	}
	r.embedder = emb
	for _, f := range files {
		l, err := agentload.Load(ctx, f, agentload.Options{Store: r.st, Events: e.events, Embedder: emb})
		if err != nil {
			return nil, nil, err
		}
		r.loaded = append(r.loaded, l)
		agents = append(agents, l.Agent)
		for k, v := range l.Prices {
			prices[k] = v
		}
	}
	return agents, prices, nil
}

// observe registers the observers every engine of the command line has:
// those of the agent files' observe sections and events inside steps
// (observeAgents), heuristic evaluators when a run ends, OpenTelemetry export when an
// OTEL_EXPORTER_OTLP_* endpoint is configured, and masking of e-mails, card
// numbers and keys before persistence when STEPWISE_MASK=1.
func (r *runtime) observe(ctx context.Context, events bool) error {
	if err := r.observeAgents(events); err != nil {
		return err
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := telemetry.New(ctx, telemetry.Config{Store: r.st})
		if err != nil {
			return fmt.Errorf("opentelemetry: %w", err)
		}
		r.stop = append(r.stop, r.eng.Observe(exp), func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = exp.Shutdown(sctx)
		})
	}
	if os.Getenv("STEPWISE_MASK") == "1" {
		r.eng.Mask(observe.NewMasker(observe.MaskConfig{}).Step)
	}
	return nil
}
