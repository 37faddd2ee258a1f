package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	cmd.AddCommand(newPolicyNewCommand())
	var provider, profile, bodyFile, dir, connection, model, now string
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
			if now != "" {
				t, err := time.Parse(time.RFC3339, now)
				if err != nil {
					return fmt.Errorf("--now %q: want an RFC 3339 time such as 2026-03-01T18:00:00Z", now)
				}
				in.Now = t
			}
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
	eval.Flags().StringVar(&now, "now", "", "when the answer arrived, RFC 3339 (default: now); rules that read input.now_ms see it")
	cmd.AddCommand(eval)
	return cmd
}

// newPolicyNewCommand is `breakwater policy new NAME [--dir DIR]`: it
// writes NAME.rego and NAME_test.rego, a rule and tests that pass as they
// stand, and never overwrites a file.
func newPolicyNewCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "new NAME [--dir DIR]",
		Short: "Scaffold an operator rule NAME.rego and its passing test NAME_test.rego",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			rule, test, err := policies.Scaffold(name)
			if err != nil {
				return err
			}
			files := []struct{ path, text string }{
				{filepath.Join(dir, name+".rego"), rule},
				{filepath.Join(dir, name+"_test.rego"), test},
			}
			for _, f := range files {
				if _, err := os.Stat(f.path); err == nil {
					return fmt.Errorf("%s exists; pick another name or remove it", f.path)
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", dir, err)
			}
			for _, f := range files {
				// O_EXCL: a file created meanwhile is not overwritten either.
				fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return fmt.Errorf("writing %s: %w", f.path, err)
				}
				_, werr := fh.WriteString(f.text)
				if cerr := fh.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return fmt.Errorf("writing %s: %w", f.path, werr)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", f.path)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "next: edit %s, then run `breakwater policy test %s`\n", files[0].path, dir)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", ".", "directory to write the files to (created if missing), e.g. your policies.dir")
	return c
}
