package policies

import (
	"context"
	"fmt"
	"slices"
)

// ReloadOperatorRules re-reads the operator rules persisted under
// OperatorRulesKey and applies them: the receiving end of
// PUT /api/policies/operator-rules on another gateway instance sharing the
// store. Rules the store no longer holds are dropped; persisted rules that
// no longer compile are an error and the rules in force stay. It reports
// whether the rules changed. It is goroutine-safe.
func (p *Pipeline) ReloadOperatorRules(ctx context.Context) (bool, error) {
	rules, err := loadOperatorRules(ctx, p.store)
	if err != nil {
		return false, fmt.Errorf("policies: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.state.Load()
	if slices.EqualFunc(cur.rules, rules, func(a, b compiledRule) bool { return a.OperatorRule == b.OperatorRule }) {
		return false, nil
	}
	next := *cur
	next.rules = rules
	p.state.Store(&next)
	p.log.Info("operator rules changed by another instance applied", "count", len(rules))
	return true, nil
}
