package admission

// AnyQuotaShared reports whether some connection has a quota-share
// semaphore (QuotaShared): when none has, the quota-share selection has
// nothing to reorder, and a caller can skip asking about each connection.
// It reads one counter, whatever the number of connections.
func (m *Manager) AnyQuotaShared() bool { return m.quotaShared.Load() > 0 }

// countQuotaShare keeps the count of AnyQuotaShared as a connection's
// configuration goes from old to cfg (nil for none: a new or a removed
// connection). The caller holds m.mu.
func (m *Manager) countQuotaShare(old, cfg *connConfig) {
	was, is := old != nil && old.qs, cfg != nil && cfg.qs
	switch {
	case is && !was:
		m.quotaShared.Add(1)
	case was && !is:
		m.quotaShared.Add(-1)
	}
}
