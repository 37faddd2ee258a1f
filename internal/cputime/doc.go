// Package cputime reads the process's CPU time for benchmarks that report
// CPU per operation beside wall time.
package cputime
