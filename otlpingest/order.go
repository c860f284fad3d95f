package otlpingest

import "sort"

// sortSpans orders held spans by start time. Exporters often have
// millisecond clocks, so a fast agent's spans start "at once": ties are
// broken by the conversation's causal order — a model call before the
// tools it called, a tool before the model call that reads its result, a
// shorter history before a longer one — then by end time, then by
// arrival.
func sortSpans(hs []*held) {
	rank := causalRanks(hs)
	sort.SliceStable(hs, func(i, j int) bool {
		a, b := hs[i], hs[j]
		if !a.s.start.Equal(b.s.start) {
			return a.s.start.Before(b.s.start)
		}
		if rank[a] != rank[b] {
			return rank[a] < rank[b]
		}
		return a.s.end.Before(b.s.end)
	})
}

// causalRanks gives model calls twice the length of their input history,
// and a tool the rank of the call that asked for it plus one (or of the
// call that read its result minus one). Other spans rank 0.
func causalRanks(hs []*held) map[*held]int {
	rank := make(map[*held]int, len(hs))
	calledBy := map[string]int{} // tool-call id → rank of the model call that made it
	readBy := map[string]int{}   // tool-call id → rank of the model call that read its result
	for _, h := range hs {
		if h.u.role != roleLLM {
			continue
		}
		r := 2 * (len(h.u.input) + 1)
		rank[h] = r
		if h.u.output != nil {
			for _, c := range h.u.output.calls {
				calledBy[c.ID] = r
			}
		}
		for _, m := range h.u.input {
			if m.role == "tool" && m.callID != "" {
				if _, ok := readBy[m.callID]; !ok {
					readBy[m.callID] = r
				}
			}
		}
	}
	for _, h := range hs {
		if h.u.role != roleTool || h.u.callID == "" {
			continue
		}
		if r, ok := calledBy[h.u.callID]; ok {
			rank[h] = r + 1
		} else if r, ok := readBy[h.u.callID]; ok {
			rank[h] = r - 1
		}
	}
	return rank
}
