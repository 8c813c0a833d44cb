// Package harnessproto is the JSON protocol between the integration tests and
// the executor harness (integration/internal/harness): the spec the tests
// write and the harness reads, and the output the harness writes and the
// tests read.
package harnessproto
