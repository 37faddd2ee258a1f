package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
			token := os.Getenv(tokenEnv)
			if token == "" {
				return fmt.Errorf("the admin token variable %s is not set (--admin-token-env)", tokenEnv)
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
	reset.Flags().StringVar(&adminURL, "admin-url", "http://127.0.0.1:8080", "base URL of the gateway's admin API")
	reset.Flags().StringVar(&tokenEnv, "admin-token-env", defaultAdminTokenEnv, "environment variable holding the admin token")
	cmd.AddCommand(reset)
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
