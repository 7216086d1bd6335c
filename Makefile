# turnstile build. The binary is tied to the CPython minor version it is
# built against: choose it with PYTHON (any python3 with a shared libpython
# and its pkg-config files), e.g. `make PYTHON=~/.pyenv/versions/3.12.1/bin/python3`.
#
#   make run    build, set up the virtualenv, serve examples/hello on :8000
#               (PORT=, ADMIN_BIND=, ARGS='more flags'; PORT is not
#               passed when ARGS has -b, --bind, --uds or --port)
#   make test   install the system packages the tests need (as root:
#               scripts/test-deps), build, set up the virtualenv, run every
#               test (RUN=regexp: only the tests it matches)
#   make cluster-test  only tests/cluster_test.go (issue 23: root, haproxy,
#               redis-server), with any PYTHON; `make test` runs it with 3.11
#   make install  copy the binary to $(PREFIX)/bin/turnstile
#
PYTHON     ?= python3
PY_REAL    := $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PY_LIBDIR  := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))' 2>/dev/null)
PY_PCDIR   := $(firstword $(wildcard $(PY_LIBDIR)/pkgconfig) $(wildcard $(PY_LIBDIR)/$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")' 2>/dev/null)/pkgconfig))

BIN        := bin/turnstile-$(PY_VERSION)
VENV       := .venv-$(PY_VERSION)

# pkg-config finds the chosen Python's python3-embed.pc; the rpath makes the
# binary load that Python's libpython, not a system one of the same soname.
export PKG_CONFIG_PATH := $(PY_PCDIR)$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export CGO_ENABLED := 1
export CGO_LDFLAGS := -Wl,-rpath,$(PY_LIBDIR) $(CGO_LDFLAGS)

.PHONY: all build venv venv-run venv-check run test test-deps test-go test-short install clean check-python cluster-test

PORT       ?= 8000
ADMIN_BIND ?= 127.0.0.1:9191
ARGS       ?=
PREFIX     ?= /usr/local

all: build

check-python:
	@test -n "$(PY_VERSION)" || { echo "make: PYTHON=$(PYTHON) does not run"; exit 1; }
	@test -n "$(PY_PCDIR)" || { echo "make: no pkgconfig directory under $(PY_LIBDIR) for $(PYTHON)"; exit 1; }

build: check-python
	go build -ldflags "-X turnstile/internal/python.BuildExecutable=$(PY_REAL)" -o $(BIN) ./cmd/turnstile
	ln -sf turnstile-$(PY_VERSION) bin/turnstile

install: build
	install -D -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/turnstile

# A virtualenv made by another Python install of the same minor version
# (Debian's 3.11 and pyenv's) is made again, since the binary refuses it;
# one the binary accepts is kept: scripts/venv-same asks the test the
# binary makes (internal/venv), so python3 and python3.11 of one install
# share it. $(VENV)/.python names the interpreter that made it.
# make run installs requirements/run.txt into it, make test
# requirements/test.txt.
$(VENV)/.python:
	$(PYTHON) -m venv $(VENV)
	echo "$(PY_REAL)" > $@

$(VENV)/.installed-%: requirements/%.txt $(VENV)/.python
	$(VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

venv-check: check-python
	@if [ -d $(VENV) ] && ! $(PYTHON) scripts/venv-same $(VENV); then \
		echo "make: $(VENV) was made by another Python; making it again with $(PY_REAL)"; rm -rf $(VENV); fi

venv: venv-check
	@$(MAKE) --no-print-directory venv-installed-test

venv-run: venv-check
	@$(MAKE) --no-print-directory venv-installed-run

# The sub-make's goal has a silent recipe that always runs: with the stamp
# itself as its goal, an up-to-date virtualenv printed make's "'...' is up
# to date" line, the first line of every `make run`.
venv-installed-%: $(VENV)/.installed-%
	@:

# Reached through that pattern, a stamp would be an intermediate file that
# make deletes when it is done.
.PRECIOUS: $(VENV)/.installed-%

# `make run` passes --port $(PORT) only when ARGS gives no address of its
# own (-b, --bind, --uds or --port, also as --bind=...): turnstile refuses
# two ways of setting the address.
RUN_PORT = $(if $(filter -b% --bind% --uds% --port%,$(ARGS)),,--port $(PORT))

run: build venv-run
	$(BIN) --venv $(VENV) --app-dir examples/hello $(RUN_PORT) --admin-bind $(ADMIN_BIND) $(ARGS) app:app

test-deps:
	@scripts/test-deps

test: test-deps build venv
	go vet ./...
	TURNSTILE_BIN=$(CURDIR)/$(BIN) TURNSTILE_VENV=$(CURDIR)/$(VENV) TURNSTILE_PYTHON=$(PY_REAL) \
		go test -count=1 -timeout 20m $(if $(RUN),-run '$(RUN)') $(if $(SKIP),-skip '$(SKIP)') ./...

# The cluster test runs once per CI run, with the 3.11 binary (its gate,
# clusterGate in tests/cluster_parts_test.go); TURNSTILE_CLUSTER=1 runs it
# with this one.
cluster-test: test-deps build venv
	TURNSTILE_CLUSTER=1 TURNSTILE_BIN=$(CURDIR)/$(BIN) TURNSTILE_VENV=$(CURDIR)/$(VENV) TURNSTILE_PYTHON=$(PY_REAL) \
		go test -count=1 -timeout 5m -run 'TestCluster' -v ./tests/

test-short: build
	go test -short -count=1 ./...

clean:
	rm -rf bin
