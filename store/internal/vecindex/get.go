package vecindex

// Vector returns a copy of the stored (L2-normalized) vector of a step,
// or nil when the index holds none.
func (ix *Index) Vector(id string) []float32 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	i, ok := ix.pos[id]
	if !ok {
		return nil
	}
	return append([]float32(nil), ix.data[i*ix.dim:(i+1)*ix.dim]...)
}
