// Package venusd is the bundled Venus-style client and server: the VPLS wire protocol, the tcp, unix and shm transports, the emulated device, the llm workload, and the in-process tracer.
package venusd
