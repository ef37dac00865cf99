# One entry point for newcomers and CI. `make test` sets everything up from scratch; `make help` lists it all.
# Any Python >= 3.11: the first of python3, python3.14 .. python3.11 on PATH that is (PYTHON=... overrides).
PYTHON_CANDIDATES := python3 python3.14 python3.13 python3.12 python3.11
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in $(PYTHON_CANDIDATES); do $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
endif
VENV := .venv
STACK ?= dev
CRD_SCHEMA_DIR ?= $(abspath ../shared/crds)
export CRD_SCHEMA_DIR
# Stack state stays in a folder of this checkout; the user's own `pulumi login` is left alone.
STATE_DIR := $(CURDIR)/.pulumi-state
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
# `up` and `preview` check the stack against the policy pack the same way.
POLICY_PACK := --policy-pack policies --policy-pack-config policies/config/$(STACK).json
PULUMI_INSTALL_URL := https://www.pulumi.com/docs/iac/download-install/

.DEFAULT_GOAL := help
# Prometheus and promtool as files of this checkout (the rule tests, the capacity lab): on PATH for every recipe.
TOOLS_DIR := $(CURDIR)/.tools
export PATH := $(TOOLS_DIR)/bin:$(PATH)

.PHONY: help venv setup system-packages prometheus-tools lint test preview up destroy lab pulumi-cli stack-file stack-named

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  STACK=$(STACK) (dev or prod); state in $(PULUMI_BACKEND_URL)"

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "Python >= 3.11 is needed: none of $(PYTHON_CANDIDATES) on PATH is; pass PYTHON=/path/to/python3" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed ## create the virtualenv (all `make up` and `make preview` need besides the Pulumi CLI)

# promtool and prometheus (rule tests, the capacity lab) come from the distribution's `prometheus` package, but
# unpacked into .tools/ rather than installed: `apt-get download` + `dpkg-deb -x` run none of its maintainer
# scripts (dpkg-deb(1): -x extracts the files only), so no system user is made, no prometheus.service is enabled
# or started, and no prometheus-node-exporter (a Recommends) comes along. The binaries need only libc.
# Elsewhere (macOS: `brew install prometheus`, which starts no service until `brew services start`) put them on PATH.
prometheus-tools:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || \
		{ command -v apt-get >/dev/null || { echo "prometheus and promtool are not on PATH and there is no apt-get: install them (macOS: brew install prometheus)" >&2; exit 1; }; \
		  $(SUDO) apt-get update -qq && rm -rf $(TOOLS_DIR)/deb && mkdir -p $(TOOLS_DIR)/deb $(TOOLS_DIR)/bin && \
		  cd $(TOOLS_DIR)/deb && apt-get download -qq prometheus && dpkg-deb -x prometheus_*.deb unpacked && \
		  ln -sf $(TOOLS_DIR)/deb/unpacked/usr/bin/prometheus $(TOOLS_DIR)/deb/unpacked/usr/bin/promtool $(TOOLS_DIR)/bin/; }

# PostgreSQL (the planner's RDB storage tests start their own throwaway server, tests/postgres.py),
# but with no server of the system's: the server package's postinst (configure_version in postgresql-common's
# maintscripts-functions, Debian 248) creates and starts a `main` cluster unless `pg_conftool
# /etc/postgresql-common/createcluster.conf show create_main_cluster` is off. That file includes
# createcluster.d/ (its `include_dir`), so a drop-in written before the install switches it off without
# editing the file the package manages. With no cluster, postgresql.service (ExecStart=/bin/true; each
# cluster is its own postgresql@ unit) and the init script start nothing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq
PG_CREATECLUSTER_D := /etc/postgresql-common/createcluster.d
system-packages: prometheus-tools ## what the tests need from the OS: promtool and prometheus (unpacked), PostgreSQL
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
		{ $(SUDO) mkdir -p $(PG_CREATECLUSTER_D) && \
		  echo 'create_main_cluster = false' | $(SUDO) tee $(PG_CREATECLUSTER_D)/no-main-cluster.conf >/dev/null && \
		  $(SUDO) apt-get update -qq && $(APT_INSTALL) postgresql >/dev/null; }

setup: system-packages venv ## the virtualenv and the system packages the tests need

lint: setup ## ruff (lint + format check) and mypy (strict on contract/ and the simulator)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint ## lint, then run the whole test suite (no cloud account needed)
	$(VENV)/bin/pytest -n 2

# Checked before anything is created: no half-made state folder or virtualenv without the CLI.
pulumi-cli:
	@command -v pulumi >/dev/null || { echo "The Pulumi CLI is not installed: see $(PULUMI_INSTALL_URL)" >&2; exit 1; }

# A typo (STACK=prdo) must not create a stray stack: only a stack with its Pulumi.<stack>.yaml.
stack-file:
	@test -f Pulumi.$(STACK).yaml || { echo "No stack file Pulumi.$(STACK).yaml: STACK must be one of: $(patsubst Pulumi.%.yaml,%,$(wildcard Pulumi.*.yaml))" >&2; exit 1; }

# Deleting is never a default: the stack is named on the command line, checked before anything else.
stack-named:
	@test "$(origin STACK)" = "command line" || { echo "Name the stack to delete: make destroy STACK=dev" >&2; exit 1; }

preview: stack-file pulumi-cli venv ## show what `make up` would change in STACK, checked by the policy pack
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	pulumi preview --stack $(STACK) $(POLICY_PACK)

up: stack-file pulumi-cli venv ## deploy STACK (needs AWS credentials), checked by the policy pack first
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	pulumi up --stack $(STACK) $(POLICY_PACK)

# A stack that runs GPUs costs money every hour: removing it is one command, but never by default.
destroy: stack-named stack-file pulumi-cli ## delete every resource of STACK=<name> (given explicitly)
	pulumi destroy --stack $(STACK)

lab: venv ## the GPU-free capacity loop (mock replicas + a real Prometheus, when it can be had without a service)
	@$(MAKE) --no-print-directory prometheus-tools || echo "make lab: no Prometheus; the lab reads the replicas' /metrics instead" >&2
	$(VENV)/bin/python -m capacity lab
