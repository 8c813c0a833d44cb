package harnessproto

import "github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"

// ---------------------------------------------------------------------------
// The spec (written by the tests, read by the harness).

// Config is the executor's configuration (zero values: the defaults).
type Config struct {
	Mode        string `json:"mode,omitempty"`
	Workspace   string `json:"workspace,omitempty"`
	KillGraceMs int    `json:"kill_grace_ms,omitempty"`
	TailBytes   int    `json:"tail_bytes,omitempty"`
	SpillCap    int64  `json:"spill_cap,omitempty"`
	Runner      string `json:"runner,omitempty"`
	SpillDir    string `json:"spill_dir,omitempty"`
	Network     bool   `json:"network,omitempty"`
	Shell       string `json:"shell,omitempty"`
}

// Session is a executor.Session.
type Session struct {
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
}

// Request is a executor.Request; a nil Stdin means none.
type Request struct {
	Command        string            `json:"command"`
	Workdir        string            `json:"workdir,omitempty"`
	TimeoutMs      *float64          `json:"timeout_ms,omitempty"`
	Mode           string            `json:"mode,omitempty"`
	Session        *Session          `json:"session,omitempty"`
	Stdin          *string           `json:"stdin,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	DshEnv         map[string]string `json:"dsh_env,omitempty"`
	StdoutMaxBytes int               `json:"stdout_max_bytes,omitempty"`
}

// Spec is the harness's input.
type Spec struct {
	Config       Config    `json:"config"`
	Action       string    `json:"action"`
	Request      Request   `json:"request"`
	Requests     []Request `json:"requests,omitempty"`
	AbortAfterMs int       `json:"abort_after_ms,omitempty"`
	KillAfterMs  int       `json:"kill_after_ms,omitempty"`
	KillOn       string    `json:"kill_on,omitempty"`
	// ArmOn (start) and ArmFile (run, start), when set, hold back the
	// abort_after_ms and kill_after_ms timers until the command got to a
	// point: its stdout contains ArmOn, or the file ArmFile exists. The
	// timers then count from that moment instead of from the call, so that
	// a slow machine cannot stop the command before it is ready (say,
	// before its TERM trap is installed).
	ArmOn   string `json:"arm_on,omitempty"`
	ArmFile string `json:"arm_file,omitempty"`
	// TimeScale multiplies the harness's own deadlines (the survivor
	// wait, hold's readiness wait): the tests' DSH_TEST_TIME_SCALE.
	TimeScale   float64 `json:"time_scale,omitempty"`
	ReadEveryMs int     `json:"read_every_ms,omitempty"`
	ReadyOn     string  `json:"ready_on,omitempty"`
	SurvivorsOf string  `json:"survivors_of,omitempty"`
	// hold: exit(0) once ready instead of blocking
	ExitAfterReady bool `json:"exit_after_ready,omitempty"`
	// start: from OnSettled, call Kill and cancel the context
	StopOnSettled bool `json:"stop_on_settled,omitempty"`
	// NofileHeadroom, when set, lowers RLIMIT_NOFILE before the action to
	// the harness's open descriptors plus this many.
	NofileHeadroom *int `json:"nofile_headroom,omitempty"`
}

// ---------------------------------------------------------------------------
// The output (written by the harness, read by the tests).

// ErrorInfo classifies an error.
type ErrorInfo struct {
	Text               string `json:"text"`
	SandboxUnavailable bool   `json:"sandbox_unavailable"`
	Code               string `json:"code,omitempty"`
	ExecError          bool   `json:"exec_error"`
	NotExist           bool   `json:"not_exist"`
	Aborted            bool   `json:"aborted"`
	Canceled           bool   `json:"canceled"`
	Invalid            bool   `json:"invalid"`
	Resource           bool   `json:"resource"` // a *sandbox.ResourceError (errors.As), ErrResourceExhausted (errors.Is)
	Closed             bool   `json:"closed"`
}

// Outcome is the end of one command.
type Outcome struct {
	Result    *executor.RunResult `json:"result"`
	Error     *ErrorInfo          `json:"error"`
	ElapsedMs float64             `json:"elapsed_ms"`
	// When, in ms from the same start as ElapsedMs, the arm marker was
	// seen, the context was cancelled (abort_after_ms) and Kill was
	// called; 0 when it did not happen.
	ArmedAtMs float64 `json:"armed_at_ms,omitempty"`
	AbortAtMs float64 `json:"abort_at_ms,omitempty"`
	KillAtMs  float64 `json:"kill_at_ms,omitempty"`
	// start only
	Deltas          []executor.Delta `json:"deltas,omitempty"`
	KillCalled      bool             `json:"kill_called,omitempty"`
	KillReturned    bool             `json:"kill_returned,omitempty"`
	StatusAfterKill string           `json:"status_after_kill,omitempty"`
	KillAfterDone   *bool            `json:"kill_after_done,omitempty"`
	KillInSettled   *bool            `json:"kill_in_settled,omitempty"`
	StatusAtEnd     string           `json:"status_at_end,omitempty"`
}

// Output is the harness's output.
type Output struct {
	Pid         int       `json:"pid"`
	SpillDir    string    `json:"spill_dir"`
	Workspace   string    `json:"workspace"`
	Outcome               // run, start
	Results     []Outcome `json:"results,omitempty"` // concurrent
	RSSBeforeKB int64     `json:"rss_before_kb"`
	HWMAfterKB  int64     `json:"hwm_after_kb"`
	EnvBefore   []string  `json:"env_before"`
	EnvAfter    []string  `json:"env_after"`
	Survivors   []string  `json:"survivors"`
	NewExecErr  string    `json:"new_executor_error,omitempty"`
	CloseErr    string    `json:"close_error,omitempty"`
}
