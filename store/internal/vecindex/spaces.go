package vecindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Encode is the storage form of a vector: little-endian float32s.
func Encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Decode fills dst from the storage form b (at least 4·len(dst) bytes).
func Decode(b []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// Spaces are the in-process indexes of one open SQL store, one Space per
// embedder searched, each loaded on its first search and brought up to
// date at the start of every search from the search's snapshot. The
// zero value is ready to use.
type Spaces struct {
	mu     sync.Mutex // serializes refreshes
	spaces map[string]*Space
}

// Space is the loaded index of one embedder, as of a database version
// (Seq, Deletes): both only grow, so snapshots are ordered by them.
type Space struct {
	Index   *Index
	Seq     int64 // the database's write mark of the embedder's vectors loaded
	Deletes int64 // the embedder's deletes counter when last refreshed
	Mark    int64 // the driver's resume mark after the rows loaded (Batch.Mark)
	Loaded  int64 // rows loaded since the index was created
}

// Version is what a driver reads of an embedder in a search's snapshot.
type Version struct {
	Dim          int
	Seq, Deletes int64
}

// Batch is the vector rows written since a space's version, as a driver
// read them.
type Batch struct {
	Entries []Entry
	Blobs   [][]byte // the storage form (Encode) of each entry's vector
	Mark    int64    // the driver's resume mark after these rows
}

// Refresh returns the space of embedder brought up to version v (read in
// the caller's snapshot). A version older than the space's (a concurrent
// search refreshed it from a newer snapshot) leaves the space alone: the
// search then skips the entries its snapshot cannot see. When Deletes
// moved, kept lists the step ids that still have a vector and the others
// are dropped; when Seq moved, load reads the rows written after sp's
// version, up to v.
func (ss *Spaces) Refresh(embedder string, v Version, kept func() ([]string, error), load func(sp *Space) (*Batch, error)) (*Space, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.spaces == nil {
		ss.spaces = make(map[string]*Space)
	}
	sp := ss.spaces[embedder]
	if sp == nil || sp.Index.Dim() != v.Dim {
		sp = &Space{Index: New(v.Dim), Deletes: v.Deletes}
		ss.spaces[embedder] = sp
	}
	if v.Seq < sp.Seq || v.Deletes < sp.Deletes {
		return sp, nil
	}
	if v.Deletes != sp.Deletes {
		ids, err := kept()
		if err != nil {
			return nil, err
		}
		keep := make(map[string]bool, len(ids))
		for _, id := range ids {
			keep[id] = true
		}
		sp.Index.Delete(sp.Index.IDs(func(id string) bool { return !keep[id] })...)
		sp.Deletes = v.Deletes
	}
	if v.Seq != sp.Seq {
		b, err := load(sp)
		if err != nil {
			return nil, err
		}
		if err := sp.put(embedder, b); err != nil {
			return nil, err
		}
		sp.Seq = v.Seq
	}
	return sp, nil
}

// put decodes a batch into the index.
func (sp *Space) put(embedder string, b *Batch) error {
	dim := sp.Index.Dim()
	vs := make([][]float32, len(b.Entries))
	for i, e := range b.Entries {
		if len(b.Blobs[i]) != 4*dim {
			return fmt.Errorf("%w: vector of step %q for %q has %d bytes, want %d", store.ErrCorrupt, e.StepID, embedder, len(b.Blobs[i]), 4*dim)
		}
		vs[i] = make([]float32, dim)
		Decode(b.Blobs[i], vs[i])
	}
	sp.Index.PutAll(b.Entries, vs)
	sp.Mark, sp.Loaded = b.Mark, sp.Loaded+int64(len(b.Entries))
	return nil
}

// Loaded reports how many rows the space of embedder has loaded (0 before
// its first search).
func (ss *Spaces) Loaded(embedder string) int64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if sp := ss.spaces[embedder]; sp != nil {
		return sp.Loaded
	}
	return 0
}

// Search answers p from sp (nil when the embedder has no vectors at
// all), in the caller's snapshot: agentSessions lists the sessions of
// p.Agent (called only when p.Agent is set), and steps reads the steps of
// the given ids visible in the snapshot. Vectors that a concurrent refresh
// added from a newer snapshot may name steps not visible yet: the search
// runs again without them.
func Search(sp *Space, p *store.VectorSearchParams, agentSessions func() ([]string, error),
	steps func(ids []string) (map[string]*steptype.Step, error)) ([]*store.VectorHit, error) {
	if sp == nil || sp.Index.Len() == 0 {
		return nil, NoVectors(p.Embedder)
	}
	if sp.Index.Dim() != len(p.Vector) {
		return nil, DimMismatch(p.Embedder, sp.Index.Dim(), len(p.Vector))
	}
	var sessions []string
	if p.Agent != "" {
		var err error
		if sessions, err = agentSessions(); err != nil {
			return nil, err
		}
	}
	hits := []*store.VectorHit{}
	f, ok := NewFilter(p, sessions)
	if !ok {
		return hits, nil
	}
	skip := map[string]bool{}
	for {
		res := sp.Index.Search(p.Vector, p.K, p.MaxDistance, f.Skip(skip))
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.StepID
		}
		found := map[string]*steptype.Step{}
		if len(ids) > 0 {
			var err error
			if found, err = steps(ids); err != nil {
				return nil, err
			}
		}
		hits = hits[:0]
		for _, r := range res {
			if st := found[r.StepID]; st != nil {
				hits = append(hits, &store.VectorHit{Step: st, Distance: r.Distance})
			} else {
				skip[r.StepID] = true
			}
		}
		if len(hits) == len(res) || len(skip) > 4*p.K {
			return hits, nil
		}
	}
}
