package transaction

import (
	"fmt"
)

// Discard drops the upper layer. The workspace is not touched.
func (t *Tx) Discard() error {
	if err := t.checkUsable(); err != nil {
		return err
	}
	s, err := t.begin()
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.lock(); err != nil {
		return err
	}
	if err := s.reload(); err != nil {
		return err
	}
	if err := t.checkUsable(); err != nil {
		return err
	}
	if t.state == StateCommitting {
		return fmt.Errorf("transaction %s is partly committed: run Commit again to finish it (discarding now would leave the workspace half-applied)", t.dir)
	}
	for _, name := range []string{upperName, workName} {
		if err := removeAllAt(s.fd, name); err != nil {
			return fmt.Errorf("discard transaction %s: %w", t.dir, err)
		}
	}
	return s.save(StateDiscarded, nil, false)
}
