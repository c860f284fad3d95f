package memory

// Exclusive reports true: an in-memory store belongs to one process.
func (m *Store) Exclusive() bool { return true }
