# Two commands on a fresh machine: `make run` (the service on embedded defaults) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install run test check lint install-smoke image-test bench-exact clean grpc docs

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch pinned in the same resolve as the package (one resolve, not two): a looser torch requirement
	# pulls a multi-GB CUDA build. --no-compile: byte-compiling every installed file was two thirds of the
	# install's time; what runs is compiled when first imported
	$(BIN)/python -m pip install -q --no-compile torch==2.13.0 -e '.[dev]'
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/mgmatch serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python scripts/check-deps.py

# The wheel installed as each role installs it, in fresh environments: the service (mgmatch[grpc], no
# torch) and training (mgmatch[train]).
install-smoke: install
	./scripts/ensure-redis.sh
	PYTHON=$(PYTHON) BUILD_PYTHON=$(BIN)/python ./scripts/install-smoke.sh

# The docs site: the generated reference and benchmark tables (written by the site's pre-build hook,
# scripts/docs_hooks.py, which runs scripts/gen_docs.py), then a strict build into site/.
docs: install
	$(BIN)/mkdocs build --strict

# The fast tier for the edit loop: lint, then the tests that start no server or subprocess and need no Redis
# (tests/conftest.py marks the others `service`, and fails a fast-tier test that starts one).
check: install lint
	MGMATCH_TEST_TIER=fast $(BIN)/python -m pytest -m "not service and not slow" -n 2

# The whole suite, side by side: the CPU-bound tests one after another on one worker per group (cpu: the
# solvers' budget tests; cpu-fit: fitting, training, labelling; tests/conftest.py), the service tests, which
# mostly wait on servers and subprocesses, spread over the other two (more workers starved the budget tests).
# Chromium (apt-get, when missing: mostly download and unpacking) installs while the venv, lint and docs run;
# the install smoke (mostly pip) runs beside the suite at a lower priority (nice 10), its output printed after.
test:
	./scripts/ensure-chromium.sh & chromium=$$!; \
	$(MAKE) --no-print-directory install lint docs; rc=$$?; wait $$chromium; crc=$$?; [ $$rc -ne 0 ] && exit $$rc; exit $$crc
	./scripts/ensure-redis.sh
	smoke_log=$$(mktemp); \
	PYTHON=$(PYTHON) BUILD_PYTHON=$(BIN)/python nice -n 10 ./scripts/install-smoke.sh > $$smoke_log 2>&1 & smoke=$$!; \
	$(BIN)/python -m pytest -n 4 --dist loadgroup; rc=$$?; \
	wait $$smoke; src=$$?; cat $$smoke_log; rm -f $$smoke_log; [ $$rc -ne 0 ] && exit $$rc; exit $$src

# The images built and run with podman (scripts/image-test.sh): the cpu image answers /v1/solve, then the
# compose stack (Redis, api, matchmaker, 2 solvers, Prometheus) matches tickets and is scraped. Installs
# podman, runc, debootstrap and podman-compose with apt-get when missing (root); needs no venv.
image-test:
	./scripts/image-test.sh

clean:
	rm -rf $(VENV) .venv-smoke .image-test .pytest_cache .ruff_cache .hypothesis site docs/_generated

# Regenerate the gRPC modules from app/rpc/matchmaker.proto (needs the dev extra: grpcio-tools).
grpc: install
	$(BIN)/python -m grpc_tools.protoc -I app/rpc --python_out=app/rpc --grpc_python_out=app/rpc app/rpc/matchmaker.proto
	sed -i 's/^import matchmaker_pb2 as/from . import matchmaker_pb2 as/' app/rpc/matchmaker_pb2_grpc.py
