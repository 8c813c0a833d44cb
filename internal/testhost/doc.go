// Package testhost holds test helpers about the host the tests run on:
// whether it can confine commands, and which processes run.
package testhost
