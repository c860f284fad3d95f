package recall

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/store"
)

// Embedder turns texts into vectors. Implementations must be safe for
// concurrent use.
type Embedder interface {
	// Name identifies the vector space: two embedders with one name must
	// produce comparable vectors of one dimension. Vectors are stored and
	// searched under this name, so a different model or configuration must
	// use a different name (the built-in embedders put their dimension in
	// it). Required to be non-empty.
	Name() string
	// Dim is the dimension of the vectors, or 0 while it is not known yet
	// (a remote model whose dimension is learned from its first answer).
	Dim() int
	// Embed returns one vector per text, in order. An empty text is an
	// error.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Errors of the recall package. Bad input also wraps store.ErrInvalid.
var (
	// ErrEmbedder: an embedder returned something unusable (wrong count,
	// inconsistent dimensions, empty vectors).
	ErrEmbedder = errors.New("stepwise: recall: embedder failed")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: recall: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
}

// vectorStore returns the part of st that recall uses, or an error
// wrapping store.ErrInvalid when there is no store.
func vectorStore(st store.Store) (store.VectorStore, error) {
	if st == nil {
		return nil, invalid("no store")
	}
	return st, nil
}

// embed calls e and checks its answer: one vector per text, all of one
// dimension, matching e.Dim() when known.
func embed(ctx context.Context, e Embedder, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, invalid("text %d to embed is empty", i)
		}
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("%w: %s returned %d vectors for %d texts", ErrEmbedder, e.Name(), len(vecs), len(texts))
	}
	dim := e.Dim()
	for i, v := range vecs {
		if dim == 0 {
			dim = len(v)
		}
		if len(v) == 0 || len(v) != dim {
			return nil, fmt.Errorf("%w: %s returned a vector of %d dimensions for text %d, want %d: %w",
				ErrEmbedder, e.Name(), len(v), i, dim, store.ErrDimensionMismatch)
		}
	}
	return vecs, nil
}

// EmbedderByName returns the local embedder a name denotes, so that a tool
// reading a database (the CLI) can search the vectors of a built-in
// embedder without being configured: "lexical-v1:256" is the lexical
// embedder of dimension 256. Remote embedders (OpenAI) need their
// configuration and are not resolved here.
func EmbedderByName(name string) (Embedder, error) {
	if rest, ok := strings.CutPrefix(name, LexicalName+":"); ok {
		dim, err := strconv.Atoi(rest)
		if err != nil {
			return nil, invalid("embedder %q: bad dimension %q", name, rest)
		}
		l, err := NewLexical(LexicalConfig{Dim: dim})
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, invalid("embedder %q is not a built-in local embedder (want %s:DIM)", name, LexicalName)
}
