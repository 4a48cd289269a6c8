// Package e2e holds perflab's end-to-end tests: the built perflab binary run as a user runs it,
// its HTML reports opened in headless Chromium, and the commands of the README tour
// (the tour in README.md). It has no code of its own outside tests.
package e2e
