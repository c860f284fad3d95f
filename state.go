package stepwise

import (
	"encoding/json"
	"fmt"
)

// MergePatch applies an RFC 7386 JSON merge patch to doc and returns the
// result. A nil or empty doc is treated as {}. A patch that is not an object
// replaces doc entirely, as the RFC says.
func MergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	if len(patch) == 0 {
		return doc, nil
	}
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("state patch: %w", err)
	}
	var d any
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	out, err := json.Marshal(mergeValue(d, p))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return out, nil
}

func mergeValue(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergeValue(dm[k], v)
	}
	return dm
}
