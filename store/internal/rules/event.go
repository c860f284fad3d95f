package rules

import (
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// PlaceEventPayload sets what a new step event stores of its payload, its
// Size and CreatedAt: a payload of at most store.InlinePayloadLimit bytes
// stays inline; a larger one is stored once as a blob by put and the event
// keeps its hash instead.
func PlaceEventPayload(e *store.StepEvent, payload []byte, now time.Time, put func(data []byte) (*store.Blob, error)) error {
	e.Payload, e.Size, e.CreatedAt, e.BlobHash = Raw(payload), int64(len(payload)), now, ""
	if len(payload) <= store.InlinePayloadLimit {
		return nil
	}
	b, err := put(payload)
	if err != nil {
		return err
	}
	e.BlobHash, e.Payload = b.Hash, nil
	return nil
}
