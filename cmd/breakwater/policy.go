package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/regfile"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// maxBodyFile bounds the --body file of policy eval.
const maxBodyFile = 4 << 20

func newPolicyCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Test and evaluate the Rego provider rules"}
	cmd.AddCommand(&cobra.Command{
		Use:   "test [DIR...]",
		Short: "Run the Rego rule tests of the built-in bundle and of operator directories",
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := policies.RunTests(cmd.Context(), args...)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				return exitError{code: 1}
			}
			fmt.Fprint(cmd.OutOrStdout(), rep.String())
			if rep.Failed() {
				return exitError{code: 1}
			}
			return nil
		},
	})
	var provider, profile, bodyFile, dir, connection, model string
	var status int
	var headers []string
	eval := &cobra.Command{
		Use:   "eval --provider P --status S --body FILE [--header K:V]",
		Short: "Show how an upstream error would be restated and classified, and by which rule",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if provider == "" {
				return fmt.Errorf("--provider is required")
			}
			in := engine.ErrorInput{Provider: provider, Connection: connection, Model: model, Profile: engine.Profile(profile),
				Status: status, Headers: map[string]string{}, Now: time.Now()}
			if bodyFile != "" {
				b, err := regfile.Read(bodyFile, maxBodyFile)
				if err != nil {
					return fmt.Errorf("reading --body %s: %w", bodyFile, err)
				}
				in.Body = string(b)
			}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("--header %q: want NAME:VALUE", h)
				}
				in.Headers[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
			in.ErrorCode, in.ErrorType = wire.ErrorFields([]byte(in.Body))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := policies.New(ctx, policies.Options{Dir: dir, Logger: log.Named("policies")})
			if err != nil {
				return err
			}
			out, _ := json.MarshalIndent(p.Explain(in), "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return nil
		},
	}
	eval.Flags().StringVar(&provider, "provider", "", "provider id the error came from")
	eval.Flags().StringVar(&profile, "profile", "apikey", "provider profile: apikey, oauth or local")
	eval.Flags().StringVar(&connection, "connection", "", "connection id (optional)")
	eval.Flags().StringVar(&model, "model", "", "upstream model (optional)")
	eval.Flags().IntVar(&status, "status", 0, "upstream HTTP status (0 for a transport error)")
	eval.Flags().StringVar(&bodyFile, "body", "", "file holding the upstream error body")
	eval.Flags().StringArrayVar(&headers, "header", nil, "upstream response header NAME:VALUE (repeatable)")
	eval.Flags().StringVar(&dir, "dir", "", "operator .rego directory to load besides the built-in bundle")
	cmd.AddCommand(eval)
	return cmd
}
