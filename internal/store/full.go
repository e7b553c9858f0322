package store

// Full reports whether err is the store's disk being full: no write can
// succeed until space is freed, and none is partly done (the transaction
// is rolled back), so the caller may say so and try again later.
func (s *Store) Full(err error) bool { return s.dialect.full(err) }
