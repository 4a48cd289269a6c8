// Package analyzers turns traces into answers: protocol decoders, request/response pairing, in-flight tracking, statistics, phase and population detection, model fits and before/after statistics. Results carry their caveats as warnings.
package analyzers
