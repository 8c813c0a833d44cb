//go:build linux && !amd64

package seccomp

// No programs are compiled ahead of time for this architecture: Program
// builds them with libseccomp (once per variant and process).
const embeddedLibseccomp = ""

var embeddedPrograms [numVariants]string
