package gemini

import "sync"

// maxSignatures bounds the thought signatures a Model keeps.
const maxSignatures = 1024

// signatures keeps the thought signatures of the function calls a Model
// received, by call id, so that the next request of the tool loop sends
// them back as Gemini 3 requires. Steps do not record them: a call
// replayed after a restart, or by another process, gets the placeholder
// signature instead. The oldest entries go first once it is full.
type signatures struct {
	mu    sync.Mutex
	m     map[string]string
	order []string
}

func (s *signatures) put(id, sig string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	if _, ok := s.m[id]; !ok {
		if len(s.order) == maxSignatures {
			delete(s.m, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, id)
	}
	s.m[id] = sig
}

func (s *signatures) get(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}
