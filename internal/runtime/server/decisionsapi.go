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
// status. Decisions carry no body and no secret (docs/policies.md
// "Decision logs").
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
	return c.JSON(fiber.Map{"decisions": s.policies.Decisions(limit), "decision_log": status})
}
