package tool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// The markers of a bash result, as the model sees them.
const (
	noOutput        = "(no output)"
	stderrHeading   = "[stderr]"
	unavailablePath = "(unavailable)"
	// EscalationHint follows a denial marker when the executor confines.
	EscalationHint = "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)

// DenialMarker is the line reporting that the sandbox denied something
// other than network access (files, and local IPC, signals, system calls).
func DenialMarker(m modes.Mode) string {
	return fmt.Sprintf("[sandbox: file access denied under %s mode]", m)
}

// NetworkDenialMarker is the line reporting that the sandbox denied network
// access (see sandbox.Denial.Network). A call denied both gets both lines,
// DenialMarker first.
func NetworkDenialMarker(m modes.Mode) string {
	return fmt.Sprintf("[sandbox: network access denied under %s mode]", m)
}

// denialMarkers are the file and network denial lines a result's denials
// call for, file first.
func denialMarkers(f sandbox.Facts) []string {
	var file, network bool
	for _, d := range f.Denials {
		switch {
		case d.Op == sandbox.OpLimit:
		case d.Network():
			network = true
		default:
			file = true
		}
	}
	var lines []string
	// A denied result whose denials were all dropped (over MaxDenials kept
	// ones that are all limits cannot happen) still says it was denied.
	if file || !network {
		lines = append(lines, DenialMarker(f.Mode))
	}
	if network {
		lines = append(lines, NetworkDenialMarker(f.Mode))
	}
	return lines
}

// AllowlistMarker names the destinations the network allowlist's egress
// proxy refused, after the denial marker.
func AllowlistMarker(destinations []string) string {
	return fmt.Sprintf("[sandbox: not in the network allowlist: %s]", strings.Join(destinations, ", "))
}

// refusedDestinations are the destinations the egress proxy refused and the
// names the stub resolver did, in first-seen order, at most maxListed (then
// "…").
func refusedDestinations(ds []sandbox.Denial) []string {
	const maxListed = 5
	var out []string
	for _, d := range ds {
		proxied := d.Op == "connect" && d.Syscall == sandbox.SyscallProxy
		if !proxied && d.Op != sandbox.OpResolve {
			continue
		}
		if len(out) == maxListed {
			return append(out, "…")
		}
		out = append(out, d.Address)
	}
	return out
}

// SuggestionMarker names the flags that would allow what was denied (each
// denial's suggestion but a wider mode, which the model asks for itself),
// after the allowlist's line: what the user, not the model, can change.
func SuggestionMarker(flags []string) string {
	return fmt.Sprintf("[sandbox: the user can allow this with %s]", strings.Join(flags, ", "))
}

// suggestedFlags are the distinct flags the denials suggest, in first-seen
// order, at most maxListed (then "…").
func suggestedFlags(ds []sandbox.Denial) []string {
	const maxListed = 5
	var out []string
	for _, d := range ds {
		// A wider mode is the model's own to ask for (EscalationHint).
		if d.Suggest == nil || d.Suggest.Flag == "" || d.Suggest.Setting == "mode" || slices.Contains(out, d.Suggest.Flag) {
			continue
		}
		if len(out) == maxListed {
			return append(out, "…")
		}
		out = append(out, d.Suggest.Flag)
	}
	return out
}

// RunnerFailureMarker is the line reporting that the runner itself failed.
func RunnerFailureMarker(m modes.Mode) string {
	return fmt.Sprintf("[sandbox: the sandbox runner itself failed under %s mode — the command did not run; this is a sandbox problem, not a command failure]", m)
}

// TimeoutMarker is the line reporting that the timer fired.
func TimeoutMarker(ms float64) string {
	return fmt.Sprintf("[timed out after %sms]", formatMs(ms))
}

// SignalMarker and ExitMarker report how the command ended; one of them is
// always the last line when present.
func SignalMarker(sig string) string { return fmt.Sprintf("[killed by signal: %s]", sig) }

// ExitMarker reports a non-zero exit code.
func ExitMarker(code int) string { return fmt.Sprintf("[exit code: %d]", code) }

// LossyNotice says that unread background output was dropped from memory.
func LossyNotice(paths []string) string {
	p := unavailablePath
	if len(paths) > 0 {
		p = strings.Join(paths, ", ")
	}
	return fmt.Sprintf("[some output was dropped from memory; full output: %s]", p)
}

// formatMs prints a millisecond count as JavaScript would (1500, 1500.5).
func formatMs(ms float64) string { return strconv.FormatFloat(ms, 'f', -1, 64) }

// truncation is the suffix of a truncated stream.
func truncation(o executor.Output) string {
	p := o.SpillPath
	if p == "" {
		p = unavailablePath
	}
	return "\n[output truncated; full output: " + p + "]"
}

// stream renders one stream's text with its truncation suffix; "" when
// there was no output at all.
func stream(o executor.Output) string {
	if o.Text == "" && !o.Truncated {
		return ""
	}
	s := strings.TrimSuffix(o.Text, "\n")
	if o.Truncated {
		s += truncation(o)
	}
	return s
}

// SurvivedDenialNote is the one quiet line of a command that succeeded
// although the sandbox denied some of its calls (a cache it could not
// write, an update check): the denials are in the result's facts, but a
// marker and the escalation hint there would teach a model to escalate a
// command that worked.
const SurvivedDenialNote = "[sandbox: some calls were denied; the command succeeded without them]"

// failed says whether a result is one a denial may have caused: a non-zero
// exit, a signal, the timer or an abort.
func failed(r *executor.RunResult) bool {
	return r.ExitCode != 0 || r.Signal != "" || r.TimedOut || r.Killed || r.Aborted
}

// sandboxMarkers are the denial (or runner failure) lines of a result: a
// runner failure outranks a denial; the file denial marker comes before the
// network one; the destinations the network allowlist refused follow them,
// then the flags the denials suggest; the escalation hint follows them only
// when the executor confines. A
// result that did not fail gets only SurvivedDenialNote.
func sandboxMarkers(r *executor.RunResult, confines bool) []string {
	f := r.Sandbox
	switch {
	case f.RunnerFailed:
		return []string{RunnerFailureMarker(f.Mode)}
	case f.Denied && !failed(r):
		return []string{SurvivedDenialNote}
	case f.Denied:
		lines := denialMarkers(f)
		if dests := refusedDestinations(f.Denials); len(dests) > 0 {
			lines = append(lines, AllowlistMarker(dests))
		}
		if flags := suggestedFlags(f.Denials); len(flags) > 0 {
			lines = append(lines, SuggestionMarker(flags))
		}
		if confines && len(f.Mode.Wider()) > 0 {
			lines = append(lines, EscalationHint)
		}
		return lines
	}
	return nil
}

// RenderForeground renders a foreground result in the contract's order:
// stdout, [stderr], (no output), then the sandbox markers, the timeout, and
// the signal or exit code last.
func RenderForeground(r *executor.RunResult, confines bool) string {
	var parts []string
	if s := stream(r.Stdout); s != "" {
		parts = append(parts, s)
	}
	if s := stream(r.Stderr); s != "" {
		parts = append(parts, stderrHeading+"\n"+s)
	}
	if len(parts) == 0 {
		parts = append(parts, noOutput)
	}
	parts = append(parts, sandboxMarkers(r, confines)...)
	if r.TimedOut {
		parts = append(parts, TimeoutMarker(r.TimeoutMs))
	}
	if m := endMarker(r); m != "" {
		parts = append(parts, m)
	}
	return strings.Join(parts, "\n")
}

// endMarker is "[killed by signal: …]" for a signal death, "[exit code: N]"
// for a non-zero exit, else "".
func endMarker(r *executor.RunResult) string {
	switch {
	case r.Signal != "":
		return SignalMarker(r.Signal)
	case r.ExitCode != 0:
		return ExitMarker(r.ExitCode)
	}
	return ""
}
