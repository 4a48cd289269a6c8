// Package analyzers turns the messages protocol/ decodes from traces into answers: in-flight tracking, statistics, units of work, phase and population detection, model fits and before/after statistics. Results carry their caveats as warnings.
package analyzers
