// Package signame names signals as a report shows them ("SIGKILL"). It is a
// leaf: it imports nothing of this module.
package signame

import "syscall"

// Name returns the conventional name of sig, e.g. "SIGKILL".
func Name(sig syscall.Signal) string {
	if n := known(sig); n != "" {
		return n
	}
	return "SIG" + sig.String()
}
