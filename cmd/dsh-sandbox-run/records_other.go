//go:build !linux

package main

import (
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// auditRecords: the sandbox runs on Linux only.
type auditRecords struct{}

func openAuditRecords(modes.Policy, func(string) string) *auditRecords { return nil }

func (r *auditRecords) auditCache() *sandbox.AuditCache { return nil }

func (r *auditRecords) save(modes.Policy) {}
