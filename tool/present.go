package tool

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

// StatusKind is the state shown in a card's status pill.
type StatusKind string

// Status kinds of a Card.
const (
	StatusPending    StatusKind = "pending"    // the call has not returned
	StatusSuccess    StatusKind = "success"    // exit code 0
	StatusExit       StatusKind = "exit"       // non-zero exit code
	StatusSignal     StatusKind = "signal"     // killed by a signal
	StatusError      StatusKind = "error"      // the tool call failed (isError)
	StatusBackground StatusKind = "background" // a background task was started
)

// CardStatus is a card's parsed exit status.
type CardStatus struct {
	Kind     StatusKind `json:"kind"`
	ExitCode int        `json:"exitCode,omitempty"`
	Signal   string     `json:"signal,omitempty"`
}

// Card is the terminal card a UI shows for a bash call.
type Card struct {
	Command     string     `json:"command"`
	Description string     `json:"description"`
	Cwd         string     `json:"cwd"`
	Output      string     `json:"output"`
	Status      CardStatus `json:"status"`
	// Changed is a short line on what the command changed in its writable
	// roots ("changed: 3 files"), from the result's change facts; "" when
	// nothing is known to have changed.
	Changed string `json:"changed,omitempty"`
}

// PresentCall is the card of a call that has not returned: its command,
// description and working directory (workdir, else the session's cwd). It
// is a pure function of its inputs, safe to replay.
func PresentCall(args json.RawMessage, sessionCwd string) Card {
	var a struct {
		Command     any `json:"command"`
		Description any `json:"description"`
		Workdir     any `json:"workdir"`
	}
	json.Unmarshal(args, &a)
	str := func(v any) string { s, _ := v.(string); return s }
	card := Card{Command: str(a.Command), Description: str(a.Description), Cwd: sessionCwd, Status: CardStatus{Kind: StatusPending}}
	if wd := str(a.Workdir); wd != "" {
		if strings.HasPrefix(wd, "/") || sessionCwd == "" {
			card.Cwd = wd
		} else {
			card.Cwd = strings.TrimSuffix(sessionCwd, "/") + "/" + wd
		}
	}
	return card
}

var (
	exitLine   = regexp.MustCompile(`^\[exit code: (-?[0-9]+)\]$`)
	signalLine = regexp.MustCompile(`^\[killed by signal: ([A-Z0-9+]+)\]$`)
)

// changedLine is the card's line on the changes of a foreground result's
// value (a Value): "changed: 1 file", "changed: N files" (a directory, a
// symlink and a removed path count as files), or "".
func changedLine(v any) string {
	var rr *executor.RunResult
	switch x := v.(type) {
	case Value:
		rr = x.RunResult
	case *Value:
		if x != nil {
			rr = x.RunResult
		}
	}
	if rr == nil {
		return ""
	}
	switch n := len(rr.Sandbox.Changes) + rr.Sandbox.ChangesDropped; n {
	case 0:
		return ""
	case 1:
		return "changed: 1 file"
	default:
		return fmt.Sprintf("changed: %d files", n)
	}
}

// PresentResult is the card of a returned call: the exit or signal marker,
// when it is the last line, is consumed into the status and removed from the
// output; every other marker stays. A pure function, safe to replay (a
// command whose real last output line is exactly such a marker is misread:
// a known limit).
func PresentResult(args json.RawMessage, sessionCwd string, r call.Result) Card {
	card := PresentCall(args, sessionCwd)
	card.Output = r.Text
	switch {
	case r.IsError:
		card.Status = CardStatus{Kind: StatusError}
		return card
	case strings.HasPrefix(r.Text, "started background task "):
		card.Status = CardStatus{Kind: StatusBackground}
		return card
	}
	card.Status = CardStatus{Kind: StatusSuccess}
	card.Changed = changedLine(r.Value)
	body, last := "", r.Text
	if i := strings.LastIndexByte(r.Text, '\n'); i >= 0 {
		body, last = r.Text[:i], r.Text[i+1:]
	}
	if m := exitLine.FindStringSubmatch(last); m != nil {
		code, _ := strconv.Atoi(m[1])
		card.Status = CardStatus{Kind: StatusExit, ExitCode: code}
		card.Output = body
	} else if m := signalLine.FindStringSubmatch(last); m != nil {
		card.Status = CardStatus{Kind: StatusSignal, Signal: m[1]}
		card.Output = body
	}
	return card
}
