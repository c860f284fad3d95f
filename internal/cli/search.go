package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
)

func init() { register(searchCmd) }

func searchCmd(e *env) *cobra.Command {
	var q recall.Query
	var kinds []string
	var embedder, rerankModel string
	var backfill, jsonOut bool
	c := &cobra.Command{
		Use:   `search "QUERY" [QUERY…]`,
		Short: "Find past steps similar to a query (embeddings, across sessions)",
		Long: `Search the stored step embeddings for the steps most similar to the queries
(cosine similarity, top --k, optional --max-distance), filtered by agent,
session and kind. Embeddings are computed in the background as runs commit
steps; --backfill first embeds the steps that have none. The default
embedder is the built-in lexical one (hashed words and character n-grams:
lexical, not semantic similarity).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if e.server != "" {
				if rerankModel != "" {
					return usagef("--rerank-model reranks locally; with --server the search runs on the server")
				}
				return e.searchRemote(cmd, args, q, kinds, embedder, backfill, jsonOut)
			}
			emb, err := searchEmbedder(embedder)
			if err != nil {
				return err
			}
			var rr recall.Reranker
			if rerankModel != "" {
				m, err := agentload.Model(rerankModel)
				if err != nil {
					return usagef("--rerank-model: %v", err)
				}
				rr = &recall.LLMReranker{Model: m}
			}
			st, err := openStore(ctx, e.db, !backfill)
			if err != nil {
				return err
			}
			defer st.Close()
			if backfill {
				stats, err := recall.Backfill(ctx, recall.WorkerConfig{Store: st, Embedder: emb})
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "backfill: %+v\n", *stats)
			}
			for _, k := range kinds {
				kind, err := steptype.ParseKind(k)
				if err != nil {
					return usagef("%v", err)
				}
				q.Kinds = append(q.Kinds, kind)
			}
			q.Texts = args
			res, err := (&recall.Searcher{Store: st, Embedder: emb, Reranker: rr}).Search(ctx, q)
			if err != nil {
				return err
			}
			return printSearch(e, res, jsonOut)
		},
	}
	c.Flags().IntVar(&q.K, "k", 10, "how many steps")
	c.Flags().Float64Var(&q.MaxDistance, "max-distance", 0, "drop steps farther than this cosine distance (0 = no limit)")
	c.Flags().StringVar(&q.Agent, "agent", "", "only steps of this agent's sessions")
	c.Flags().StringSliceVar(&q.SessionIDs, "session", nil, "only steps of these sessions")
	c.Flags().StringSliceVar(&kinds, "kind", nil, "only steps of these kinds")
	c.Flags().StringVar(&embedder, "embedder", "", "embedder the steps were embedded with: lexical-v1:DIM (default lexical-v1:256) or openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL)")
	c.Flags().BoolVar(&backfill, "backfill", false, "embed steps without embeddings first")
	c.Flags().StringVar(&rerankModel, "rerank-model", "", "rerank the candidates with this model (provider:name, e.g. openai:gpt-4o-mini or scripted:FILE)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the QueryWithSteps JSON")
	return c
}

// searchRemote searches through the server (GET /v1/search).
func (e *env) searchRemote(cmd *cobra.Command, args []string, q recall.Query, kinds []string, embedder string, backfill, jsonOut bool) error {
	if backfill {
		return usagef("--backfill embeds the local database; the server embeds its steps itself")
	}
	for _, k := range kinds {
		kind, err := steptype.ParseKind(k)
		if err != nil {
			return usagef("%v", err)
		}
		q.Kinds = append(q.Kinds, kind)
	}
	q.Texts = args
	c, err := client.New(e.server, client.WithToken(e.token))
	if err != nil {
		return err
	}
	res, err := c.Search(cmd.Context(), q, embedder)
	if err != nil {
		return err
	}
	return printSearch(e, (*recall.QueryWithSteps)(res), jsonOut)
}

// printSearch prints the hits, or their JSON.
func printSearch(e *env, res *recall.QueryWithSteps, jsonOut bool) error {
	if jsonOut {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	for _, h := range res.Steps {
		fmt.Fprintf(e.stdout, "%.3f  session %s  %s\n", h.Score, h.Step.SessionID, stepLine(h.Step))
	}
	if len(res.Steps) == 0 {
		fmt.Fprintln(e.stdout, "no matching steps")
	}
	return nil
}

// searchEmbedder returns the embedder of --embedder: a built-in lexical
// one, or openai:MODEL configured from the environment.
func searchEmbedder(name string) (recall.Embedder, error) {
	if name == "" {
		return recall.DefaultEmbedder(), nil
	}
	if model, ok := strings.CutPrefix(name, "openai:"); ok {
		e, err := recall.NewOpenAI(recall.OpenAIConfig{Model: model})
		if err != nil {
			return nil, usagef("--embedder: %v", err)
		}
		return e, nil
	}
	e, err := recall.EmbedderByName(name)
	if err != nil {
		return nil, usagef("--embedder: %v", err)
	}
	return e, nil
}
