package sqlite

// Exclusive reports whether this store is the only writer of its database
// file: a writable store holds the process lock (PATH.lock) for its whole
// life, so any run lease held by another owner belongs to a process that
// died. The engine uses this to resume such runs at once instead of waiting
// for the lease to expire.
func (s *Store) Exclusive() bool { return s.lock != nil && !s.cfg.ReadOnly }
