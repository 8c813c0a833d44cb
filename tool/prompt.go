package tool

import (
	"fmt"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// PromptSection is a section of the system prompt contributed by a tool.
type PromptSection struct {
	ID    string
	Order int
	Text  string
}

// SystemPromptSection is the bash tool's system prompt section: "tool:bash",
// order 105.
func SystemPromptSection() PromptSection {
	return PromptSection{
		ID:    "tool:bash",
		Order: 105,
		Text:  "Check the [exit code: N] marker on every bash result; investigate failures before moving on.",
	}
}

// PolicyContext is a short text for the model stating the sandbox mode and
// workspace its session's bash commands currently run with (to be sent as
// runtime context, so it can change without touching the system prompt).
func (b *Bash) PolicyContext(c call.Context) string {
	ws := b.o.Executor.Workspace()
	if c.Agent != nil && c.Agent.Workspace != "" {
		ws = c.Agent.Workspace
	}
	m := b.EffectiveMode(c)
	net := "the network is off"
	switch al := b.o.Executor.Allowlist(); {
	case b.o.Executor.Network():
		net = "the network is on"
	case al != nil:
		net = "the network is off except through a proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set) to " + allowlistText(al)
	}
	switch m {
	case modes.ReadOnly:
		return fmt.Sprintf("Sandbox: bash commands in this session run in read-only mode (workspace: %s). "+
			"They can read files anywhere except credentials (~/.ssh, ~/.aws, tokens, shell histories) "+
			"but cannot write any (only to /dev/null and terminals); %s.", ws, net)
	case modes.WorkspaceWrite:
		return fmt.Sprintf("Sandbox: bash commands in this session run in workspace-write mode (workspace: %s). "+
			"They can read files anywhere except credentials (~/.ssh, ~/.aws, tokens, shell histories) "+
			"and write inside the workspace and the temp directories (/tmp, $TMPDIR), "+
			"except .git/hooks, .git/config and the workspace's editor, agent and shell config "+
			"(.vscode, .idea, .claude, .mcp.json, .envrc, .bashrc, ...); %s.", ws, net)
	default:
		return fmt.Sprintf("Sandbox: bash commands in this session run in danger-full-access mode (workspace: %s): "+
			"no sandbox, full access to files and the network.", ws)
	}
}

// allowlistText names what a network allowlist lets commands reach.
func allowlistText(al *modes.Allowlist) string {
	var parts []string
	if len(al.Domains) > 0 {
		parts = append(parts, strings.Join(al.Domains, ", "))
	}
	for _, h := range al.Hosts {
		parts = append(parts, "the local service "+h.String())
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
