package server

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/policies"
)

// defaultDecisionsLimit is how many decisions GET /api/policies/decisions
// returns without a limit.
const defaultDecisionsLimit = 100

// handleGetDecisions serves GET /api/policies/decisions?limit=N: the most
// recent failure-path decisions of the policy pipeline, newest first (N
// from 1 to the ring buffer's size, default 100), and the decision log's
// status. With request_id=ID only the decisions of that client request
// are listed (the console's request detail links to them). Decisions
// carry no body and no secret (docs/policies.md "Decision logs").
func (s *Server) handleGetDecisions(c *fiber.Ctx) error {
	limit := defaultDecisionsLimit
	if raw := c.Query("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return s.adminError(c, badRequest("limit", "must be a positive integer"))
		}
		limit = n
	}
	var status *policies.DecisionLogStatus
	if st := s.policies.Status(); st.DecisionLog != nil {
		status = st.DecisionLog
	}
	decisions := s.policies.Decisions(limit)
	if id := c.Query("request_id"); id != "" {
		all := s.policies.Decisions(0)
		decisions = decisions[:0]
		for _, d := range all {
			if d.RequestID == id && len(decisions) < limit {
				decisions = append(decisions, d)
			}
		}
	}
	return c.JSON(fiber.Map{"decisions": decisions, "decision_log": status})
}
