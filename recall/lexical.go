package recall

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LexicalName is the name prefix of the lexical embedder; its full name is
// "lexical-v1:DIM". The version changes whenever the features change, so
// vectors of two versions are never compared.
const LexicalName = "lexical-v1"

// DefaultLexicalDim is the default dimension of the lexical embedder.
const DefaultLexicalDim = 256

// LexicalConfig configures the lexical embedder.
type LexicalConfig struct {
	// Dim is the vector dimension, 16..65536. More dimensions mean fewer
	// hash collisions and more memory and search time. Default 256.
	Dim int
}

// Lexical is a local, deterministic embedder that needs no model: it
// hashes word unigrams, word bigrams and character trigrams of each word
// into Dim signed buckets (the "hashing trick"), weights repeated features
// sublinearly (square root), and L2-normalizes.
//
// It is lexical, not semantic: two texts are close when they share words
// or word fragments ("deploy" / "deployment", "tests failed" / "failed
// tests"), not when they mean the same thing in other words ("car" and
// "automobile" are unrelated to it). It is a good default for finding past
// steps that mention the same tools, files, errors, ids and terms; use an
// embedding model (NewOpenAI) for meaning.
//
// Text is lower-cased and split on anything that is not a letter or a
// digit; a small list of English stop words is dropped unless nothing else
// is left. The same text always gives the same vector, on every platform.
type Lexical struct {
	dim int
}

// NewLexical returns a lexical embedder.
func NewLexical(cfg LexicalConfig) (*Lexical, error) {
	if cfg.Dim == 0 {
		cfg.Dim = DefaultLexicalDim
	}
	if cfg.Dim < 16 || cfg.Dim > 1<<16 {
		return nil, invalid("lexical embedder: dimension %d outside 16..65536", cfg.Dim)
	}
	return &Lexical{dim: cfg.Dim}, nil
}

// DefaultEmbedder returns the lexical embedder of dimension 256.
func DefaultEmbedder() *Lexical { return &Lexical{dim: DefaultLexicalDim} }

// Name returns "lexical-v1:DIM".
func (l *Lexical) Name() string { return fmt.Sprintf("%s:%d", LexicalName, l.dim) }

// Dim returns the vector dimension.
func (l *Lexical) Dim() int { return l.dim }

// Embed implements Embedder. It fails only for an empty text.
func (l *Lexical) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, invalid("lexical embedder: text %d is empty", i)
		}
		out[i] = l.vector(t)
	}
	return out, nil
}

// Feature weights: a word counts 1, a bigram 0.5, and the trigrams of a
// word share 0.5.
const (
	wordWeight    = 1.0
	bigramWeight  = 0.5
	trigramWeight = 0.5
)

// Feature namespaces, hashed before the feature bytes.
const (
	nsWord byte = iota + 1
	nsBigram
	nsTrigram
	nsRaw
)

func (l *Lexical) vector(text string) []float32 {
	words := tokenize(text)
	feats := make(map[uint64]float64, 4*len(words))
	add := func(h uint64, w float64) { feats[h] += w }
	if len(words) == 0 {
		// Only punctuation or symbols: the text itself is the feature.
		add(hash(nsRaw, strings.TrimSpace(text), ""), 1)
	}
	for i, w := range words {
		add(hash(nsWord, w, ""), wordWeight)
		if i > 0 {
			add(hash(nsBigram, words[i-1], w), bigramWeight)
		}
		grams := trigrams(w)
		for _, g := range grams {
			add(hash(nsTrigram, g, ""), trigramWeight/float64(len(grams)))
		}
	}
	v := make([]float64, l.dim)
	for h, w := range feats {
		i := (h >> 1) % uint64(l.dim)
		if h&1 == 1 {
			v[i] -= math.Sqrt(w)
		} else {
			v[i] += math.Sqrt(w)
		}
	}
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	out := make([]float32, l.dim)
	if sum == 0 {
		// Every feature cancelled out (vanishingly rare): a fixed
		// direction keeps the vector usable.
		out[0] = 1
		return out
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out
}

// tokenize lower-cases text and returns its words, stop words removed
// unless they are all there is.
func tokenize(text string) []string {
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	kept := fields[:0:0]
	for _, f := range fields {
		if !stopWords[f] {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		return fields
	}
	return kept
}

// trigrams returns the character trigrams of "^word$".
func trigrams(w string) []string {
	s := "^" + w + "$"
	var out []string
	for i := 0; i < len(s); {
		_, n1 := utf8.DecodeRuneInString(s[i:])
		j := i + n1
		if j >= len(s) {
			break
		}
		_, n2 := utf8.DecodeRuneInString(s[j:])
		k := j + n2
		if k >= len(s) {
			break
		}
		_, n3 := utf8.DecodeRuneInString(s[k:])
		out = append(out, s[i:k+n3])
		i = j
	}
	return out
}

// hash is 64-bit FNV-1a over a namespace byte and one or two strings.
func hash(ns byte, a, b string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	h = (h ^ uint64(ns)) * prime
	for i := 0; i < len(a); i++ {
		h = (h ^ uint64(a[i])) * prime
	}
	if b != "" {
		h = (h ^ ' ') * prime
		for i := 0; i < len(b); i++ {
			h = (h ^ uint64(b[i])) * prime
		}
	}
	// Final avalanche (splitmix64), so that low bits are well mixed.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// stopWords are dropped before hashing: they match everything.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then else of to in on at by for with from as into
		about than too very just also is are was were be been being am it its this that these those
		i you he she we they me my your our their his her them us do does did done not no so can will
		would should could has have had what which who whom how when where there here all any some`) {
		m[w] = true
	}
	return m
}()
