// Package vecindex holds what the store drivers share for step vectors:
// parameter validation, an exact in-process cosine index with a heap top-k,
// the search filters, the storage form of a vector, and for the SQL
// drivers the per-embedder indexes refreshed from a search's snapshot
// (Spaces) and the search over them (Search). Drivers keep their own
// storage and SQL; every driver searches with Index, so they agree by
// construction, and store/storetest checks it.
package vecindex

import (
	"fmt"
	"math"

	"github.com/stepwise-run/stepwise/store"
)

// Missing page sizes.
const (
	DefaultMissingLimit = 100
	MaxMissingLimit     = 1000
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
}

// CheckVector fails for an empty vector, or one holding NaN, an infinity
// or only zeros (it has no direction to compare).
func CheckVector(what string, v []float32) error {
	if len(v) == 0 {
		return invalid("%s is empty", what)
	}
	var sum float64
	for i, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return invalid("%s has a non-finite value at index %d", what, i)
		}
		sum += f * f
	}
	if sum == 0 {
		return invalid("%s is all zeros", what)
	}
	return nil
}

// CheckUpsert validates p and returns the dimension of its vectors.
func CheckUpsert(p *store.VectorUpsertParams) (int, error) {
	if p == nil || p.Embedder == "" {
		return 0, invalid("vector upsert needs an embedder name")
	}
	dim := 0
	seen := make(map[string]bool, len(p.Vectors))
	for _, v := range p.Vectors {
		if v.StepID == "" {
			return 0, invalid("vector upsert: a vector has no step id")
		}
		if seen[v.StepID] {
			return 0, invalid("vector upsert: step %q is listed twice", v.StepID)
		}
		seen[v.StepID] = true
		if err := CheckVector(fmt.Sprintf("vector of step %q", v.StepID), v.Vector); err != nil {
			return 0, err
		}
		if dim == 0 {
			dim = len(v.Vector)
		} else if len(v.Vector) != dim {
			return 0, fmt.Errorf("%w: embedder %q: vector of step %q has %d dimensions, the others of the call %d",
				store.ErrDimensionMismatch, p.Embedder, v.StepID, len(v.Vector), dim)
		}
	}
	return dim, nil
}

// DimMismatch is the error of a vector whose length differs from the
// embedder's stored dimension.
func DimMismatch(embedder string, stored, got int) error {
	return fmt.Errorf("%w: embedder %q stores %d-dimensional vectors, got %d dimensions "+
		"(a different model or configuration must use a different embedder name)",
		store.ErrDimensionMismatch, embedder, stored, got)
}

// NoVectors is the error of a search over an embedder without vectors.
func NoVectors(embedder string) error {
	return fmt.Errorf("%w: %q", store.ErrNoVectors, embedder)
}

// CheckSearch validates the parameters of VectorSearch that need no stored
// data.
func CheckSearch(p *store.VectorSearchParams) error {
	switch {
	case p == nil || p.Embedder == "":
		return invalid("vector search needs an embedder name")
	case p.K < 1:
		return invalid("vector search: k must be at least 1, got %d", p.K)
	case p.K > store.MaxVectorK:
		return invalid("vector search: k must be at most %d, got %d", store.MaxVectorK, p.K)
	case p.MaxDistance < 0 || math.IsNaN(p.MaxDistance):
		return invalid("vector search: max distance must be >= 0 (0 means no limit), got %v", p.MaxDistance)
	case !p.Before.IsZero() && !p.After.IsZero() && !p.After.Before(p.Before):
		return invalid("vector search: empty time range [%v, %v)", p.After, p.Before)
	}
	for _, k := range p.Kinds {
		if !k.Valid() {
			return invalid("vector search: unknown step kind %q", k)
		}
	}
	return CheckVector("query vector", p.Vector)
}

// CheckMissing validates the parameters of VectorMissing and returns the
// page size.
func CheckMissing(p *store.VectorMissingParams) (int, error) {
	if p == nil || p.Embedder == "" {
		return 0, invalid("vector missing needs an embedder name")
	}
	for _, k := range p.Kinds {
		if !k.Valid() {
			return 0, invalid("vector missing: unknown step kind %q", k)
		}
	}
	switch {
	case p.Limit < 0:
		return 0, invalid("vector missing: negative limit %d", p.Limit)
	case p.Limit == 0:
		return DefaultMissingLimit, nil
	case p.Limit > MaxMissingLimit:
		return MaxMissingLimit, nil
	}
	return p.Limit, nil
}
