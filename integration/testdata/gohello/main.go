// Command gohello does nothing: BenchmarkHookReceiver's floor for any Go
// program (the runtime's start and exit). It is not shipped.
package main

func main() {}
