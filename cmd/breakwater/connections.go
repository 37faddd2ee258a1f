package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultAdminTokenEnv is the variable the admin commands read the admin
// token from by default (the token is never a flag: flags show in ps).
const defaultAdminTokenEnv = "BREAKWATER_ADMIN_TOKEN"

func newConnectionsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "connections", Short: "Operate on the connections of a running gateway"}
	var provider, connection, adminURL, tokenEnv string
	reset := &cobra.Command{
		Use:   "reset --provider P [--connection C]",
		Short: "Clear cooldowns, model lockouts and terminal states (banned, expired, credits_exhausted) of one connection or of every connection of a provider",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if provider == "" {
				return errors.New("--provider is required")
			}
			token, err := adminToken(tokenEnv)
			if err != nil {
				return err
			}
			body, _ := json.Marshal(struct {
				Provider   string `json:"provider"`
				Connection string `json:"connection,omitempty"`
			}{provider, connection})
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			out, err := adminPost(ctx, strings.TrimRight(adminURL, "/")+"/api/resilience/connections/reset", token, body)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "breakwater:", err)
				return exitError{code: 1}
			}
			var res struct {
				Connections []struct {
					Provider        string `json:"provider"`
					Connection      string `json:"connection"`
					PreviousState   string `json:"previous_state"`
					LockoutsCleared int    `json:"lockouts_cleared"`
				} `json:"connections"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return fmt.Errorf("reading the gateway's answer: %w", err)
			}
			for _, c := range res.Connections {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: reset (was %s, %d model lockouts cleared)\n",
					c.Provider, c.Connection, c.PreviousState, c.LockoutsCleared)
			}
			return nil
		},
	}
	reset.Flags().StringVar(&provider, "provider", "", "provider id (required)")
	reset.Flags().StringVar(&connection, "connection", "", "connection id; absent = every connection of the provider")
	adminFlags(reset, &adminURL, &tokenEnv)
	cmd.AddCommand(reset, newConnectionsTestCommand())
	return cmd
}

// adminFlags adds the flags every admin command shares: the admin API's
// base URL and the variable holding the admin token.
func adminFlags(cmd *cobra.Command, adminURL, tokenEnv *string) {
	cmd.Flags().StringVar(adminURL, "admin-url", "http://127.0.0.1:8080", "base URL of the gateway's admin API")
	cmd.Flags().StringVar(tokenEnv, "admin-token-env", defaultAdminTokenEnv, "environment variable holding the admin token")
}

// adminToken reads the admin token from the variable env.
func adminToken(env string) (string, error) {
	token := os.Getenv(env)
	if token == "" {
		return "", fmt.Errorf("the admin token variable %s is not set (--admin-token-env)", env)
	}
	return token, nil
}

// newConnectionsTestCommand is `breakwater connections test`: one small
// real request to a connection's upstream through the gateway (POST
// /api/providers/{provider}/connections/{connection}/test). A passed test
// closes a DEGRADED breaker; a failed one records nothing and exits 1.
func newConnectionsTestCommand() *cobra.Command {
	var provider, connection, model, adminURL, tokenEnv string
	cmd := &cobra.Command{
		Use:   "test --provider P --connection C [--model M]",
		Short: "Send one small real request to a connection's upstream; a pass returns a DEGRADED breaker to CLOSED",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if provider == "" || connection == "" {
				return errors.New("--provider and --connection are required")
			}
			token, err := adminToken(tokenEnv)
			if err != nil {
				return err
			}
			body, _ := json.Marshal(struct {
				Model string `json:"model,omitempty"`
			}{model})
			// The gateway bounds the test at 30 s; leave it room to answer.
			ctx, cancel := context.WithTimeout(cmd.Context(), 45*time.Second)
			defer cancel()
			u := strings.TrimRight(adminURL, "/") + "/api/providers/" + url.PathEscape(provider) + "/connections/" + url.PathEscape(connection) + "/test"
			out, err := adminPost(ctx, u, token, body)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "breakwater:", err)
				return exitError{code: 1}
			}
			var res struct {
				OK            bool   `json:"ok"`
				Status        int    `json:"status"`
				LatencyMS     int64  `json:"latency_ms"`
				Model         string `json:"model"`
				BreakerBefore string `json:"breaker_before"`
				BreakerAfter  string `json:"breaker_after"`
				Reason        string `json:"reason"`
				Message       string `json:"message"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return fmt.Errorf("reading the gateway's answer: %w", err)
			}
			if !res.OK {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: test failed on %s: status %d, %s: %s\n",
					provider, connection, res.Model, res.Status, res.Reason, res.Message)
				return exitError{code: 1}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: test passed on %s (status %d, %d ms); breaker %s -> %s\n",
				provider, connection, res.Model, res.Status, res.LatencyMS, res.BreakerBefore, res.BreakerAfter)
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "provider id (required)")
	cmd.Flags().StringVar(&connection, "connection", "", "connection id (required)")
	cmd.Flags().StringVar(&model, "model", "", "model to test; absent = the provider's first model")
	adminFlags(cmd, &adminURL, &tokenEnv)
	return cmd
}

// adminPost sends a JSON body to an admin endpoint with the admin token and
// returns the answer's body; a non-2xx answer is an error carrying the
// gateway's message.
func adminPost(ctx context.Context, url, token string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling the admin API: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(out, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("admin API answered %d: %s", resp.StatusCode, e.Error.Message)
		}
		return nil, fmt.Errorf("admin API answered %d", resp.StatusCode)
	}
	return out, nil
}
