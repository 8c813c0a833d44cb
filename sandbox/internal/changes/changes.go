package changes

// Ops of a Change.
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpRemoved  = "removed"
	OpRenamed  = "renamed"
	OpMode     = "mode" // only the permission bits changed
)

// Change is one path the command changed.
type Change struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// From is the path a renamed file or directory had before.
	From string `json:"from,omitempty"`
	// Type is what Path is at the end: "file", "dir", "symlink" or
	// "other"; "" when it was removed.
	Type string `json:"type,omitempty"`
	// Size is the final size of a regular file.
	Size int64 `json:"size,omitempty"`
	// Mode is the final permission bits, in octal ("0644"); "" when
	// removed.
	Mode string `json:"mode,omitempty"`
	// Root is the writable root the path lies in.
	Root string `json:"root,omitempty"`
}

// MaxChanges is how many changes a command's result lists per writable
// root; the rest are only counted, so that the churn of one root (a build's
// temporary files in /tmp) cannot crowd out the workspace's own changes.
const MaxChanges = 1000

// MaxTracked is how many distinct paths a tracker remembers per writable
// root: past it, the paths of that root named for the first time are only
// counted (as dropped changes), so a command that writes millions of files
// cannot grow the supervisor without bound.
const MaxTracked = 20 * MaxChanges
