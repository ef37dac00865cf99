# One entry point for newcomers and CI. `make test` sets everything up from scratch.
PYTHON ?= python3.11
VENV := .venv
STACK ?= dev
CRD_SCHEMA_DIR ?= $(abspath ../shared/crds)
export CRD_SCHEMA_DIR

.PHONY: setup system-packages test up preview lab

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

# promtool and prometheus (rule tests, the capacity lab) come from the OS packages.
system-packages:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

setup: system-packages $(VENV)/.installed

test: setup
	$(VENV)/bin/pytest

# Needs the Pulumi CLI and AWS credentials; state stays in a local folder (no Pulumi Cloud).
up: setup
	mkdir -p .pulumi-state
	pulumi login file://$(CURDIR)/.pulumi-state
	pulumi stack select --create $(STACK)
	pulumi up --stack $(STACK)

preview: setup
	pulumi preview --stack $(STACK) --policy-pack policies --policy-pack-config policies/config/$(STACK).json

lab: setup
	$(VENV)/bin/python -m capacity lab
