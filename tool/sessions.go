package tool

import (
	"fmt"
	"sync"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// SessionModes holds the sandbox mode a harness set for each session (the
// session override). The bash tool reads it at each call; an approved
// escalation never changes it. The zero value is ready to use and it is
// safe for concurrent use.
type SessionModes struct {
	mu    sync.Mutex
	modes map[string]modes.Mode
}

// SetSessionMode sets the mode of session's calls until changed or cleared.
func (s *SessionModes) SetSessionMode(session string, m modes.Mode) error {
	if session == "" {
		return fmt.Errorf("session modes: empty session id")
	}
	if !m.Valid() {
		return fmt.Errorf("session modes: %w %d", modes.ErrUnknownMode, int(m))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modes == nil {
		s.modes = map[string]modes.Mode{}
	}
	s.modes[session] = m
	return nil
}

// ClearSessionMode removes session's override: its calls use the
// executor's default again.
func (s *SessionModes) ClearSessionMode(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.modes, session)
}

// SessionMode returns session's override, if one is set.
func (s *SessionModes) SessionMode(session string) (modes.Mode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.modes[session]
	return m, ok
}
