package plugins

import "context"

// OnReload sets fn, called after every successful Reload (the admin API's
// POST /api/plugins/reload), so the gateway can tell the other instances
// sharing its store to reload too. ReloadFromPeer does not call it.
func (h *Host) OnReload(fn func(ctx context.Context)) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.onReload = fn
	h.mu.Unlock()
}

// ReloadFromPeer is Reload on behalf of another gateway instance that
// reloaded its plugins: the same all-or-nothing reload of this instance's
// plugin files, without the OnReload hook.
func (h *Host) ReloadFromPeer(ctx context.Context) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	return h.apply(ctx, h.specs)
}
