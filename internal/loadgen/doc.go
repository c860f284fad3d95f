// Package loadgen is the HTTP streaming load harness behind `stepwise
// bench --http` and BenchmarkHTTPStreaming: it serves an engine with a
// scripted streaming model on loopback, connects one SSE subscriber per
// run (in this process or in a client process of its own) and measures
// delivery latency, steps per second, CPU per event, heap and collector
// work. TuneGC is the collector setting `stepwise serve` runs with.
package loadgen
