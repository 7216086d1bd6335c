# turnstile build. The binary is tied to the CPython minor version it is
# built against: choose it with PYTHON (any python3 with a shared libpython
# and its pkg-config files), e.g. `make PYTHON=~/.pyenv/versions/3.12.1/bin/python3`.
#
#   make run    build, set up the virtualenv, serve examples/hello on :8000
#   make test   build, set up the virtualenv, run every test
#               (RUN=regexp: only the tests it matches)
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

.PHONY: all build venv run test test-go test-short clean check-python

all: build

check-python:
	@test -n "$(PY_VERSION)" || { echo "make: PYTHON=$(PYTHON) does not run"; exit 1; }
	@test -n "$(PY_PCDIR)" || { echo "make: no pkgconfig directory under $(PY_LIBDIR) for $(PYTHON)"; exit 1; }

build: check-python
	go build -ldflags "-X turnstile/internal/python.BuildExecutable=$(PY_REAL)" -o $(BIN) ./cmd/turnstile
	$(if $(filter default,$(origin PYTHON)),ln -sf turnstile-$(PY_VERSION) bin/turnstile)

# The stamp names the interpreter that made the virtualenv: another one of
# the same minor version (Debian's 3.11 and pyenv's) makes it again, since
# the binary refuses a virtualenv of another Python install.
$(VENV)/.installed: requirements/test.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements/test.txt
	echo "$(PY_REAL)" > $@

venv: check-python
	@if [ -f $(VENV)/.installed ] && [ "$$(cat $(VENV)/.installed)" != "$(PY_REAL)" ]; then \
		echo "make: $(VENV) was made by another Python; making it again with $(PY_REAL)"; rm -rf $(VENV); fi
	@$(MAKE) --no-print-directory $(VENV)/.installed

run: build venv
	$(BIN) --venv $(VENV) --app-dir examples/hello --port 8000 app:app

test: build venv
	go vet ./...
	TURNSTILE_BIN=$(CURDIR)/$(BIN) TURNSTILE_VENV=$(CURDIR)/$(VENV) TURNSTILE_PYTHON=$(PY_REAL) \
		go test -count=1 -timeout 20m $(if $(RUN),-run '$(RUN)') ./...

test-short: build
	go test -short -count=1 ./...

clean:
	rm -rf bin
