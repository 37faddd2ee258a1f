package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

func newMockCommand(g *globalFlags) *cobra.Command {
	var listen, scriptPath string
	cmd := &cobra.Command{
		Use:   "mock",
		Short: "Run the fault-injecting mock upstream (OpenAI and Anthropic wire formats)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var script *mock.Script
			if scriptPath != "" {
				if script, err = mock.LoadScript(scriptPath); err != nil {
					return fmt.Errorf("loading mock script: %w", err)
				}
			}
			m := mock.New(script, log)
			addr, err := m.Start(listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "mock upstream listening on http://%s\n", addr)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			<-sig
			return m.Close()
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9090", "address to listen on")
	cmd.Flags().StringVar(&scriptPath, "script", "", "YAML or JSON script of scripted responses")
	return cmd
}
