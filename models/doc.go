// Package models holds pure performance models with units in their docs: the batch model, Little's law, closed-loop queueing, and coalescing/pipelining/transport what-ifs.
package models
