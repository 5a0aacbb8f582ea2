package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/claudemesh/claudemesh-go/config"
)

// startCPUProfile starts the profile config.EnvCPUProfile names, if any,
// and returns what ends it.
func startCPUProfile() func() {
	path := os.Getenv(config.EnvCPUProfile)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "claudemesh: %s: %v (no profile)\n", config.EnvCPUProfile, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
