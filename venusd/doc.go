// Package venusd is the bundled Venus-style daemon and its client: the two server loops (a
// goroutine per connection, or one batch event loop), the client and its modes, and the llm and
// ping workloads. The wire format, the transports, the emulated device and link and the
// in-process tracer are its sub-packages.
package venusd
