# The two commands of the README. Both set up .venv first (idempotent: seconds when ready).
PY := .venv/bin/python
export HF_HUB_OFFLINE ?= 1
export VLLM_NO_USAGE_STATS ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup demo demo-rl test test-slow perf

setup:
	bash scripts/setup_env.sh

demo: setup  ## the seeing model on the seeing suite, with real, blank and reversed frames side by side + leaderboard
	.venv/bin/vbench-async run --model seeing-qwen3-vl --suite seeing --ablation none,blank,reverse --output-dir runs/demo

demo-rl: setup  ## evaluate the tiny model, RL-train it on the synthetic training split, evaluate again, compare
	$(PY) scripts/demo_rl.py --out runs/demo-rl

# Two workers: a vLLM engine core computes on one thread, so two of them (or one and the unit tests) fill 2 cores.
# Tests sharing the demo runs run on one worker (xdist_group "engine"), those sharing only the vLLM server on the other
# ("server"), tests sharing a module fixture together (tests/conftest.py); the rest spread.
TEST_WORKERS ?= 2

# The browser (apt) and the venv (uv/pip) install side by side; either failing fails the target.
test:  ## the whole default test suite (real vLLM engine on CPU, real headless Chromium)
	@bash scripts/install_browser.sh & browser=$$!; rc=0; bash scripts/setup_env.sh || rc=$$?; \
		wait $$browser || rc=$$?; exit $$rc
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-slow: setup  ## long variants (many crash trials, big suites)
	$(PY) -m pytest -q -m slow -n $(TEST_WORKERS) --dist loadgroup

perf: setup
	$(PY) perf/frames.py
	$(PY) perf/pipeline.py
	$(PY) perf/train_step.py
	$(PY) perf/memory.py
