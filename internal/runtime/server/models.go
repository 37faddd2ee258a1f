package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// The model listing: GET /v1/models and GET /v1/models/{id}, in the
// OpenAI shape, or in the Anthropic shape when the request carries
// anthropic-version (what the Anthropic SDKs and Claude Code send). It
// lists what the gateway serves — every provider/model and combo — from
// the configuration; no upstream is called.

// Anthropic's list pages: limit defaults to 20 and ranges 1..1000.
const (
	anthropicPageDefault = 20
	anthropicPageMax     = 1000
)

// epochRFC3339 is the created_at of a model whose release date is not
// known (Anthropic's API allows an epoch value).
const epochRFC3339 = "1970-01-01T00:00:00Z"

// openAIModel is one entry of OpenAI's model list.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// anthropicModel is Anthropic's ModelInfo.
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// modelCatalog is what the listing shows of one routing view, built once.
type modelCatalog struct {
	// ids are the model ids in listing order; owner[id] the provider
	// ("breakwater" for a combo).
	ids    []string
	owner  map[string]string
	index  map[string]int
	openAI []byte // the whole OpenAI list
}

// modelsList builds the catalog of every provider model and combo.
func modelsList(t *topology.Topology) *modelCatalog {
	c := &modelCatalog{owner: map[string]string{}, index: map[string]int{}}
	data := []openAIModel{}
	for _, id := range t.ModelIDs() {
		owner := "breakwater"
		if p, ok := providerOf(t, id); ok {
			owner = p
		}
		c.index[id] = len(c.ids)
		c.ids = append(c.ids, id)
		c.owner[id] = owner
		data = append(data, openAIModel{ID: id, Object: "model", OwnedBy: owner})
	}
	c.openAI, _ = json.Marshal(map[string]any{"object": "list", "data": data})
	return c
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

// anthropicShape reports whether the request asks for Anthropic's shapes.
func anthropicShape(c *fiber.Ctx) bool { return c.Get("anthropic-version") != "" }

func (s *Server) handleModels(c *fiber.Ctx) error {
	cat := s.view.Load().models
	if !anthropicShape(c) {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(cat.openAI)
	}
	page, e := cat.anthropicPage(c.Query("limit"), c.Query("after_id"), c.Query("before_id"))
	if e != nil {
		return s.writeError(c, e, wire.FormatMessages)
	}
	return c.JSON(page)
}

// handleModel answers GET /v1/models/{id}; an id with a "/"
// (provider/model) may come percent-encoded.
func (s *Server) handleModel(c *fiber.Ctx) error {
	id, err := url.PathUnescape(c.Params("*"))
	if err != nil {
		id = c.Params("*")
	}
	cat := s.view.Load().models
	_, known := cat.index[id]
	if anthropicShape(c) {
		if !known {
			return s.writeError(c, &wire.APIError{Status: 404, Type: "not_found_error", Code: "model_not_found", Param: "model_id",
				Message: fmt.Sprintf("model %q is not served here; GET /v1/models lists the available models", id)}, wire.FormatMessages)
		}
		return c.JSON(anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: epochRFC3339})
	}
	if !known {
		return s.writeError(c, &wire.APIError{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model %q is not served here; GET /v1/models lists the available models", id)}, wire.FormatChat)
	}
	return c.JSON(openAIModel{ID: id, Object: "model", OwnedBy: cat.owner[id]})
}

// anthropicList is Anthropic's page of models.
type anthropicList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

// anthropicPage is one page of the catalog in Anthropic's shape: at most
// limit models right after after_id, or right before before_id, or from
// the start. A bad limit or an unknown cursor is a 400 naming it.
func (cat *modelCatalog) anthropicPage(limitText, afterID, beforeID string) (*anthropicList, *wire.APIError) {
	limit := anthropicPageDefault
	if limitText != "" {
		n, err := strconv.Atoi(limitText)
		if err != nil || n < 1 || n > anthropicPageMax {
			return nil, wire.InvalidRequest("limit", fmt.Sprintf("must be an integer from 1 to %d (got %q)", anthropicPageMax, limitText))
		}
		limit = n
	}
	if afterID != "" && beforeID != "" {
		return nil, wire.InvalidRequest("before_id", "give after_id or before_id, not both")
	}
	var from, to int
	var more func(lo, hi int) bool
	switch {
	case beforeID != "":
		i, ok := cat.index[beforeID]
		if !ok {
			return nil, wire.InvalidRequest("before_id", fmt.Sprintf("no model %q", beforeID))
		}
		from, to = max(0, i-limit), i
		more = func(lo, _ int) bool { return lo > 0 }
	case afterID != "":
		i, ok := cat.index[afterID]
		if !ok {
			return nil, wire.InvalidRequest("after_id", fmt.Sprintf("no model %q", afterID))
		}
		from = i + 1
		to = min(len(cat.ids), from+limit)
		more = func(_, hi int) bool { return hi < len(cat.ids) }
	default:
		to = min(len(cat.ids), limit)
		more = func(_, hi int) bool { return hi < len(cat.ids) }
	}
	page := &anthropicList{Data: make([]anthropicModel, 0, to-from), HasMore: more(from, to)}
	for _, id := range cat.ids[from:to] {
		page.Data = append(page.Data, anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: epochRFC3339})
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	return page, nil
}
