// Package python holds no Go code of its own: it is the directory of the
// Python example harness (dsh_sandbox.py, standard library only), which runs
// commands through dsh-sandbox-run --report and reads the report's facts.
// Its Go test builds dsh-sandbox-run (or takes $DSH_SANDBOX_RUN) and runs the
// example's unit tests and the example itself, so that the example stays
// true to the CLI and the report format.
package python
