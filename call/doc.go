// Package call holds what every model-facing tool shares: who calls
// (Agent), the context of one call (Context), what a call returns (Result),
// and the Tool interface a harness registers. Packages tool (bash) and tasks
// (task_output, task_list, task_kill, bash_output, bash_kill) implement it.
//
// It lives beside the tools, not inside one, so that tasks and envreg, which
// the bash tool uses, never import from a consumer. It must never import
// another package of this module.
package call
