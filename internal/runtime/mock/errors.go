package mock

import (
	"net/http"
	"strings"
)

// providerError is what a real provider says for a status.
type providerError struct {
	oaType, oaCode string // OpenAI error.type and error.code ("" = null)
	anType         string // Anthropic error.type
	oaMsg, anMsg   string // messages; "%m" is replaced by the model
}

var providerErrors = map[int]providerError{
	400: {"invalid_request_error", "", "invalid_request_error",
		"Invalid request.", "Invalid request."},
	401: {"invalid_request_error", "invalid_api_key", "authentication_error",
		"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
		"invalid x-api-key"},
	402: {"insufficient_quota", "insufficient_quota", "billing_error",
		"You exceeded your current quota, please check your plan and billing details.",
		"Your credit balance is too low to access the Anthropic API."},
	403: {"permission_error", "unsupported_country_region_territory", "permission_error",
		"Country, region, or territory not supported",
		"Your API key does not have permission to use the specified resource."},
	404: {"invalid_request_error", "model_not_found", "not_found_error",
		"The model `%m` does not exist or you do not have access to it.",
		"model: %m"},
	408: {"timeout", "", "timeout_error",
		"Request timed out.", "Request timed out."},
	413: {"invalid_request_error", "request_too_large", "request_too_large",
		"Request exceeds the maximum allowed number of bytes.",
		"Request exceeds the maximum allowed number of bytes."},
	429: {"requests", "rate_limit_exceeded", "rate_limit_error",
		"Rate limit reached for %m in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
		"This request would exceed the rate limit for your organization of 50 requests per minute. Please try again later."},
	500: {"server_error", "", "api_error",
		"The server had an error while processing your request. Sorry about that!",
		"Internal server error"},
	502: {"server_error", "", "api_error",
		"Bad gateway.", "Bad gateway"},
	503: {"server_error", "engine_overloaded", "overloaded_error",
		"The engine is currently overloaded, please try again later.", "Overloaded"},
	504: {"timeout", "", "timeout_error",
		"Gateway timeout.", "Gateway timeout"},
	529: {"server_error", "", "overloaded_error",
		"The server is overloaded, please try again later.", "Overloaded"},
}

func lookupProviderError(status int) providerError {
	if pe, ok := providerErrors[status]; ok {
		return pe
	}
	text := http.StatusText(status)
	if text == "" {
		text = "Error"
	}
	if status >= 500 {
		return providerError{"server_error", "", "api_error", text + ".", text}
	}
	return providerError{"invalid_request_error", "", "invalid_request_error", text + ".", text}
}

// appendMessage appends msg, with every "%m" replaced by the model, as a
// JSON string.
func appendMessage(b []byte, msg, model string) []byte {
	return appendJSONString(b, strings.ReplaceAll(msg, "%m", model))
}

// appendErrorBody appends a realistic provider error JSON for status in the
// endpoint's format. msg, when not empty, replaces the canned message.
func appendErrorBody(b []byte, wr wire, status int, model, msg string) []byte {
	pe := lookupProviderError(status)
	if wr == wireAnthropic || wr == wireCountTokens {
		if msg == "" {
			msg = pe.anMsg
		}
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendJSONString(b, pe.anType)
		b = append(b, `,"message":`...)
		b = appendMessage(b, msg, model)
		return append(b, "}}\n"...)
	}
	if msg == "" {
		msg = pe.oaMsg
	}
	b = append(b, `{"error":{"message":`...)
	b = appendMessage(b, msg, model)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, pe.oaType)
	b = append(b, `,"param":null,"code":`...)
	if pe.oaCode == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, pe.oaCode)
	}
	return append(b, "}}\n"...)
}
