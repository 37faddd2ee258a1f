package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// keyCredential prefixes the persisted credential digest of a connection:
// credential/<provider>/<connection>. It lives beside the connection's
// cooldown record, without expiry.
const keyCredential = "credential/"

// Reset reasons logged by ResetConnections and SyncCredentials.
const (
	// ResetByOperator is a reset asked through the admin API or the CLI.
	ResetByOperator = "operator reset"
	// ResetCredentialChanged is a reset because the configured credential
	// of the connection changed.
	ResetCredentialChanged = "credential changed"
)

// CredentialHash is the digest of a connection's configured credential
// that ConnectionSpec.CredentialHash carries: the hex SHA-256 of the
// resolved secret, "" for an empty secret. It is a pure function; the
// digest, like the secret, is never logged.
func CredentialHash(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ResetEntry is one connection a reset cleared.
type ResetEntry struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	// PreviousState is the connection's test status before the reset:
	// active, unavailable (cooling) or a terminal state.
	PreviousState TestStatus `json:"previous_state"`
	// LockoutsCleared counts the active model lockouts removed.
	LockoutsCleared int `json:"lockouts_cleared"`
}

// ResetResult is the answer of ResetConnections: every connection of the
// request, in order, whether or not it held state.
type ResetResult struct {
	Connections []ResetEntry `json:"connections"`
}

// ResetConnections clears the cooldown, the terminal state and the model
// lockouts of one connection of provider, or of every connection of it
// when connection is "" (the configured ones and any other holding state),
// persists the result and logs each reset with reason (ResetByOperator for
// the admin API). Unlike ClearCooldowns it clears terminal states: this is
// how an operator brings back a banned, expired or credits_exhausted
// connection. An empty or unknown provider, or a connection the provider
// neither configures nor holds state for, is an error wrapping
// ErrInvalidRequest.
func (e *Engine) ResetConnections(ctx context.Context, provider, connection, reason string) (ResetResult, error) {
	res := ResetResult{Connections: []ResetEntry{}}
	if provider == "" {
		return res, fmt.Errorf("%w: provider is required", ErrInvalidRequest)
	}
	known := e.connectionsOf(provider)
	if len(known) == 0 && e.lookupProvider(provider) == nil {
		return res, fmt.Errorf("%w: unknown provider %q", ErrInvalidRequest, provider)
	}
	targets := known
	if connection != "" {
		if !slices.Contains(known, connection) {
			return res, fmt.Errorf("%w: provider %q has no connection %q", ErrInvalidRequest, provider, connection)
		}
		targets = []string{connection}
	}
	var errs []error
	for _, c := range targets {
		entry, err := e.resetOne(ctx, provider, c, reason)
		res.Connections = append(res.Connections, entry)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("reset connections: %w", err)
	}
	return res, nil
}

// connectionsOf lists, sorted, the configured connections of provider and
// every other connection of it holding cooldown or lockout state.
func (e *Engine) connectionsOf(provider string) []string {
	var out []string
	for _, k := range e.knownConnections() {
		if k.provider == provider && !slices.Contains(out, k.connection) {
			out = append(out, k.connection)
		}
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}

// resetOne clears one connection (ResetConnection) and logs it when it
// held state. The log names the provider, the connection, the previous
// state and the reason, never a credential.
func (e *Engine) resetOne(ctx context.Context, provider, connection, reason string) (ResetEntry, error) {
	now := e.clock.Now()
	entry := ResetEntry{Provider: provider, Connection: connection, PreviousState: TestStatusActive}
	if st, ok := e.cooldowns.get(provider, connection); ok {
		entry.PreviousState = st.status(now)
	}
	for _, k := range e.lockouts.keysOf(provider, connection) {
		if le, ok := e.lockouts.get(k); ok && le.Until.After(now) {
			entry.LockoutsCleared++
		}
	}
	cleared, err := e.ResetConnection(ctx, provider, connection)
	if cleared {
		e.log.Info("connection reset", "provider", provider, "connection", connection,
			"previous_state", string(entry.PreviousState), "lockouts_cleared", entry.LockoutsCleared, "reason", reason)
	}
	return entry, err
}

// SyncCredentials compares the credential digest of every connection of
// specs (ConnectionSpec.CredentialHash) with the digest persisted for it:
// a different one means the credential changed since the state was
// recorded, so the connection starts clean (ResetConnection, logged with
// ResetCredentialChanged, without the digest). A connection seen for the
// first time keeps its state. The new digest is persisted either way;
// connections without a digest are skipped. New calls it; a configuration
// reload calls it again with the new specs. It returns the connections
// reset, as "provider/connection".
func (e *Engine) SyncCredentials(ctx context.Context, specs []ProviderSpec) ([]string, error) {
	var reset []string
	var errs []error
	for _, p := range specs {
		for _, c := range p.Connections {
			if c.CredentialHash == "" {
				continue
			}
			key := keyCredential + url.PathEscape(p.ID) + "/" + url.PathEscape(c.ID)
			old, ok, err := e.store.Get(ctx, key)
			if err != nil {
				errs = append(errs, fmt.Errorf("read %s: %w", key, err))
				continue
			}
			if ok && string(old) == c.CredentialHash {
				continue
			}
			if ok {
				if _, err := e.resetOne(ctx, p.ID, c.ID, ResetCredentialChanged); err != nil {
					errs = append(errs, err)
				}
				reset = append(reset, p.ID+"/"+c.ID)
			}
			if err := e.store.Put(ctx, key, []byte(c.CredentialHash), 0); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", key, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reset, fmt.Errorf("sync credentials: %w", err)
	}
	return reset, nil
}

// TerminalConnection is one connection in a terminal state, with when and
// why it entered it (the health API lists them per provider).
type TerminalConnection struct {
	Connection string     `json:"connection"`
	State      TestStatus `json:"state"`
	// Since is when the state was entered (zero for a record written
	// before this was recorded).
	Since time.Time `json:"since,omitzero"`
	// Reason and Rule are the outcome's reason and the id of the rule that
	// classified it; LastError is the upstream's message.
	Reason    string `json:"reason,omitempty"`
	Rule      string `json:"rule,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// terminalConnections lists the terminal connections by provider.
func (e *Engine) terminalConnections() map[string][]TerminalConnection {
	out := make(map[string][]TerminalConnection)
	for _, st := range e.cooldowns.list("") {
		if !st.TestStatus.Terminal() {
			continue
		}
		out[st.Provider] = append(out[st.Provider], TerminalConnection{
			Connection: st.Connection,
			State:      st.TestStatus,
			Since:      st.TerminalAt,
			Reason:     st.TerminalReason,
			Rule:       st.TerminalRule,
			LastError:  st.LastError,
		})
	}
	return out
}
