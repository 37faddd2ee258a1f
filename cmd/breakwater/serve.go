package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/breakwater-dev/breakwater/internal/pprofserve"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/demo"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

const defaultConfigFile = "breakwater.yaml"

// newDemoToken returns a random admin token for one demo run.
func newDemoToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "demo-" + hex.EncodeToString(b[:])
}

func newServeCommand(g *globalFlags) *cobra.Command {
	var cfgPath, listen, demoToken, pprofAddr string
	demoTraffic := true
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway (the embedded demo when no configuration is given)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, access, err := g.loggers(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer access.Flush()
			routeRedisLogs(log)
			if pprofAddr != "" {
				stopPprof, err := pprofserve.Start(pprofAddr, log.Named("pprof"))
				if err != nil {
					return err
				}
				defer stopPprof()
			}
			if cfgPath == "" {
				if _, err := os.Stat(defaultConfigFile); err == nil {
					cfgPath = defaultConfigFile
				}
			}
			var cfg *config.Config
			var demoMock *mock.Server
			if cfgPath == "" {
				demoMock = mock.New(demo.Script(), log.Named("demo"))
				mockAddr, err := demoMock.Start("127.0.0.1:0")
				if err != nil {
					return fmt.Errorf("starting the demo's mock upstream: %w", err)
				}
				defer demoMock.Close()
				cfg, err = config.Parse(demo.Config("http://"+mockAddr, listen), "demo.yaml")
				if err != nil {
					return fmt.Errorf("demo configuration: %w", err)
				}
				log.Info("no configuration given: running the embedded demo", "mock_upstream", "http://"+mockAddr)
				// The demo's admin token is made fresh for this run and shown
				// on stdout (never in the logs) so the dashboard can be used.
				demoToken = newDemoToken()
				cfg.Server.AdminToken = config.Secret(demoToken)
			} else {
				cfg, err = loadConfig(cfgPath)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					return exitError{code: 1}
				}
				if listen != "" {
					cfg.Server.Listen = listen
					if err := cfg.Validate(); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
						return exitError{code: 1}
					}
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			gw, err := gateway.Start(ctx, cfg, gateway.Options{Logger: log, AccessLog: access, Version: version})
			if err != nil {
				return err
			}
			if demoMock != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "\nBreakwater demo is up on http://%s. Try:\n\n%s\n\nConsole: http://%s/dashboard\nAdmin token for this run: %s\n",
					gw.Addr(), demo.Curl(gw.Addr()), gw.Addr(), demoToken)
				if demoTraffic {
					tctx, stopTraffic := context.WithCancel(ctx)
					defer stopTraffic()
					go demo.Traffic(tctx, "http://"+gw.Addr(), demo.TrafficInterval, demo.TrafficLimit)
					fmt.Fprintf(cmd.OutOrStdout(), "The demo sends itself a request every %v (its mock fails some on purpose) so the console has something to show; --demo-traffic=false turns that off.\n",
						demo.TrafficInterval)
				}
				fmt.Fprintln(cmd.OutOrStdout())
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "breakwater listening on http://%s\n", gw.Addr())
			}
			select {
			case <-ctx.Done():
				log.Info("shutting down")
			case err := <-gw.Done():
				if err != nil {
					return err
				}
			}
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := gw.Close(sctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file (default ./breakwater.yaml, else the embedded demo)")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address, overriding server.listen")
	cmd.Flags().BoolVar(&demoTraffic, "demo-traffic", true, "in the embedded demo, send a request every 1.5 s so the console shows live data")
	// Hidden: Go runtime profiles on a loopback address, for the benchmark.
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go runtime profiles (/debug/pprof/) on this loopback address")
	_ = cmd.Flags().MarkHidden("pprof")
	return cmd
}
