package modes_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// A workspace-write policy keeps the workspace's protected names read-only
// whether or not they exist; Unprotect opts one out.
func ExampleDerive_protectedNames() {
	ws, _ := os.MkdirTemp("/var/tmp", "example-ws-")
	defer os.RemoveAll(ws)
	ws, _ = filepath.EvalSymlinks(ws)
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Unprotect: []string{".vscode"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []string{"main.go", ".envrc", ".claude/settings.json", ".vscode/settings.json"} {
		fmt.Printf("%s writable: %v\n", f, p.Writable(filepath.Join(ws, f)))
	}
	_, err = modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Unprotect: []string{".git/hooks"}})
	fmt.Println(err != nil)
	// Output:
	// main.go writable: true
	// .envrc writable: false
	// .claude/settings.json writable: false
	// .vscode/settings.json writable: true
	// true
}
