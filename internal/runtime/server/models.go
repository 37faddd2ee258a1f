package server

import (
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// modelsList renders the OpenAI model list of every provider model and
// combo once, at build time.
func modelsList(t *topology.Topology) []byte {
	var data []modelEntry
	for _, id := range t.ModelIDs() {
		owner := "breakwater"
		if p, ok := providerOf(t, id); ok {
			owner = p
		}
		data = append(data, modelEntry{ID: id, Object: "model", OwnedBy: owner})
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	return b
}

func providerOf(t *topology.Topology, id string) (string, bool) {
	if _, ok := t.Combo(id); ok {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return id[:i], true
		}
	}
	return "", false
}

func (s *Server) handleModels(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(s.view.Load().models)
}
