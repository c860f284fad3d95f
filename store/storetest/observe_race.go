package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/store"
)

// Observation writes racing each other: what several goroutines of one
// process, or several processes on one database, do at once.

// testStepEventsConcurrent appends events to one step from many goroutines
// at once: every event gets its own index, 0..n-1, none is lost.
func testStepEventsConcurrent(t *testing.T, _ store.Store, o store.ObservationStore) {
	const writers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := o.StepEventAppend(t.Context(), &store.StepEventAppendParams{Events: []*store.StepEvent{
					{ID: fmt.Sprintf("w%d-%d", w, i), StepID: "s-1", Type: "x"}}})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent StepEventAppend: %v", err)
	}
	list, err := o.StepEventList(t.Context(), &store.StepEventListParams{StepID: "s-1"})
	if err != nil || len(list) != writers*each {
		t.Fatalf("events after concurrent appends: %d, %v; want %d", len(list), err, writers*each)
	}
	seen := map[int64]bool{}
	for _, e := range list {
		seen[e.Index] = true
	}
	for i := range int64(writers * each) {
		if !seen[i] {
			t.Errorf("index %d missing after concurrent appends", i)
		}
	}
}

// testBlobsConcurrent puts the same bytes from many goroutines at once:
// every put succeeds with the one stored blob.
func testBlobsConcurrent(t *testing.T, _ store.Store, o store.ObservationStore) {
	data := bytes.Repeat([]byte("same screenshot "), 100)
	var wg sync.WaitGroup
	hashes := make([]string, 8)
	for i := range hashes {
		wg.Go(func() {
			b, err := o.BlobPut(t.Context(), &store.BlobPutParams{Data: data, ContentType: "image/png"})
			if err != nil {
				t.Errorf("concurrent BlobPut: %v", err)
				return
			}
			hashes[i] = b.Hash
		})
	}
	wg.Wait()
	for _, h := range hashes {
		if h != store.BlobHash(data) {
			t.Errorf("concurrent BlobPut hashes %v, want all %s", hashes, store.BlobHash(data))
			break
		}
	}
	if b, err := o.BlobGet(t.Context(), &store.BlobGetParams{Hash: store.BlobHash(data)}); err != nil || !bytes.Equal(b.Data, data) {
		t.Errorf("BlobGet after concurrent puts: %v", err)
	}
}
