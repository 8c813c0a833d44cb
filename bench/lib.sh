# Shared by the bench/ scripts (sourced). find_go sets $go to the Go
# toolchain ($GO, go on PATH, or /usr/local/go/bin/go) or calls die.
find_go() {
  go="${GO:-}"
  if [ -z "$go" ]; then
    if command -v go >/dev/null 2>&1; then go=go; else go=/usr/local/go/bin/go; fi
  fi
  "$go" version >/dev/null 2>&1 || die "Go not found (set GO, or install Go 1.26 in /usr/local/go)"
}

# print_probe BIN: what BIN --probe says this host enforces, so that the figures after it say
# which layers were on; a non-zero exit is shown, not fatal.
print_probe() {
  echo "== $1 --probe"
  local rc=0
  "$1" --probe || rc=$?
  [ "$rc" = 0 ] || echo "(--probe exited $rc)"
  echo
}
