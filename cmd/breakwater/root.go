package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
)

// exitError ends the process with a code after its message was printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func asExit(err error, target *exitError) bool { return errors.As(err, target) }

type globalFlags struct {
	logFormat string
	logLevel  string
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "breakwater",
		Short:         "Breakwater: an LLM API gateway that keeps requests flowing when upstream providers fail",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	root.AddCommand(newServeCommand(g), newMockCommand(g), newConfigCommand(), newPolicyCommand(g), newConnectionsCommand(), newVersionCommand())
	return root
}

// logger builds the root hclog logger from the global flags.
func (g *globalFlags) logger(w io.Writer) (hclog.Logger, error) {
	log, _, err := g.loggers(w)
	return log, err
}

// loggers builds the root hclog logger from the global flags, and the
// writer of the access lines (logger "breakwater.access") with the same
// output, format and level; they share the output's mutex, so their lines
// never interleave. The access lines are batched: the caller flushes the
// writer when it stops.
func (g *globalFlags) loggers(w io.Writer) (hclog.Logger, *accesslog.Writer, error) {
	if g.logFormat != "text" && g.logFormat != "json" {
		return nil, nil, fmt.Errorf("--log-format must be text or json (got %q)", g.logFormat)
	}
	lvl := hclog.LevelFromString(g.logLevel)
	if lvl == hclog.NoLevel {
		return nil, nil, fmt.Errorf("--log-level must be one of trace, debug, info, warn, error (got %q)", g.logLevel)
	}
	if w == nil {
		w = os.Stderr
	}
	mu := new(sync.Mutex)
	// Access lines are batched (accesslog.DefaultFlushEvery); the
	// logger's lines go through the access writer's shared output, which
	// writes the pending access lines first.
	access := accesslog.New(accesslog.Options{Output: w, Mutex: mu, JSON: g.logFormat == "json", Level: lvl, Name: "breakwater.access",
		FlushEvery: accesslog.DefaultFlushEvery})
	log := hclog.New(&hclog.LoggerOptions{
		Name:       "breakwater",
		Level:      lvl,
		Output:     access.SharedOutput(),
		Mutex:      mu,
		JSONFormat: g.logFormat == "json",
	})
	return log, access, nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "breakwater", version)
			return nil
		},
	}
}
