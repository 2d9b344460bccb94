"""How a workload plan reads on the console: `vbench-async plan`'s tables and the plan lines `run` starts with."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TextIO

from ..redact import scrub_text

if TYPE_CHECKING:  # the workload package imports the families: not at the console's start
    from ..workload.plan import Spread, WorkloadPlan

log = logging.getLogger(__name__)


def _k(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,.0f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _spread(s: Any) -> str:
    return "-" if s is None else f"{_k(s.min)}/{_k(s.median)}/{_k(s.max)}"


def benchmark_line(b: Any, limit: int) -> str:
    """One line per benchmark (printed at the start of `run`)."""
    failing = ", ".join(f"{n} {kind}" for kind, n in sorted(b.unplanned.items()))
    parts = [f"plan {b.id}: {b.n_samples} sample(s)", f"frames {_spread(b.frames)}",
             f"prompt tokens {_spread(b.prompt_tokens)}", f"context {b.largest_context:,} of {limit:,}"]
    if b.cache_bytes_to_write:
        parts.append(f"{_bytes(b.cache_bytes_to_write)} to cache")
    if failing:
        parts.append(f"failing before the engine: {failing}")
    parts.append("fits" if b.fits else f"{b.overflow} do NOT fit (context_overflow); fix: {b.fix}")
    return ", ".join(parts)


def print_plan_lines(workload: Any, not_run: dict[str, str], file: TextIO | None = None, engine: str = "",
                     verbose: bool = False, starting: str = "", then: str = "") -> None:
    """`run`'s start: one line naming the engine, the model, its window and KV cache; a line for each benchmark that
    will not run or has samples that cannot fit (every benchmark's line with `verbose`). Every line goes to the log.
    `then`: a later run on the engine already started (a sweep's next budget): a short line named so, not a second
    start line."""
    file = file or sys.stdout  # looked up per call: the console may have replaced sys.stdout
    lines: list[tuple[bool, str]] = []  # (worth the console, line)
    if workload is not None:
        lines += [(verbose or not b.fits or bool(b.unplanned), benchmark_line(b, workload.engine.max_model_len))
                  for b in workload.benchmarks]
    few = verbose or len(not_run) <= 2
    lines += [(few, f"plan {bid}: NOT RUN: {why}") for bid, why in not_run.items()]  # all of them in the log
    if not few:
        n = len(not_run) + (len(workload.benchmarks) if workload is not None else 0)
        lines.append((True, f"not run (no data): {len(not_run)} of {n} benchmarks ({', '.join(list(not_run)[:5])}"
                            f"{' ...' if len(not_run) > 5 else ''}); `vbench-async data check` lists what each needs"))
    if workload is not None:
        lines.append((True, then_line(workload, then) if then else start_line(workload, engine)))
        lines += [(True, f"frame cache: {w}") for w in (workload.cache.warnings if workload.cache is not None else ())]
        if starting and workload.n_to_send != 0:  # nothing to send (a resume with nothing left): no engine
            lines.append((True, starting))
    for shown, line in lines:
        line = scrub_text(line)  # the engine's URL may carry a password
        log.info("%s", line)
        if shown:
            print(line, file=file)
    file.flush()


def start_line(w: Any, engine: str = "") -> str:
    """The one line `run` starts with: engine, model, work, the context window and the KV cache it reserves."""
    samples = sum(b.n_samples for b in w.benchmarks)
    done = getattr(w, "n_done", 0)
    if done and not samples:
        return f"start: model {w.model}: {done:,} of {done:,} already done, nothing to run"
    work = f"{samples:,} sample(s) in {len(w.benchmarks)} benchmark(s)"
    if done:
        work += f" ({done:,} of {done + samples:,} already done)"
    head = ", ".join(p for p in (f"engine {engine}" if engine else "", f"model {w.model}", work) if p)
    return f"start: {head}; {engine_line(w)[len('engine: '):]}"


def then_line(w: Any, label: str) -> str:
    """A later run on the engine already started: its work, without the engine's settings again."""
    samples, done = sum(b.n_samples for b in w.benchmarks), getattr(w, "n_done", 0)
    work = f"{samples:,} sample(s) in {len(w.benchmarks)} benchmark(s)" + (f" ({done:,} already done)" if done else "")
    return f"then {label}: {work}, on the same engine"


def engine_line(w: Any) -> str:
    e = w.engine
    batched = f", max_num_batched_tokens {e.max_num_batched_tokens:,}" if e.max_num_batched_tokens else ""
    model = "" if e.fits_model else f" (the longest prompt + answer, {e.needed:,}, exceeds it)"
    return (f"engine: max_model_len {e.max_model_len:,} ({e.source}; model limit {e.model_limit:,}{model}){batched}; "
            f"KV {_bytes(e.kv_bytes_per_sequence)} per sequence, {_bytes(e.kv_bytes_at_concurrency)} at "
            f"{e.concurrency} sequences at once")


def fail_early_lines(b: Any) -> list[str]:
    """Why a benchmark's samples fail before the engine: a line of counts by kind, then each kind's first sample
    with its reason and the fix `run` would print for it."""
    if not b.unplanned:
        return []
    from .failures import fix_for

    kinds = sorted(b.unplanned.items(), key=lambda kv: (-kv[1], kv[0]))
    out = [f"{b.id}: {sum(b.unplanned.values())} sample(s) fail before the engine: "
           + ", ".join(f"{n} {kind}" for kind, n in kinds)]
    for kind, _ in kinds:
        example = scrub_text(b.unplanned_example.get(kind, "")).splitlines()
        out.append(f"  {kind}: {example[0][:200] if example else '-'}; fix: {fix_for(kind)}")
    return out


def _print_table(rows: Sequence[Sequence[str]], file: TextIO, left: int = 1) -> None:
    """Rows under a header line, the first `left` columns left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(n) if j < left else c.rjust(n) for j, (c, n) in enumerate(zip(r, widths))), file=file)
        if i == 0:
            print("  ".join("-" * n for n in widths), file=file)


def print_plan(w: Any, file: TextIO | None = None) -> None:
    """The `plan` command's table."""
    file = file or sys.stdout  # looked up per call, not bound at import: a test's capture may have replaced it
    rows = [("benchmark", "samples", "frames min/med/max", "visual tokens", "prompt tokens", "largest context",
             "cache to write", "fits")]
    for b in w.benchmarks:
        fails = sum(b.unplanned.values())
        rows.append((b.id, f"{b.n_samples}" + (f" ({fails} fail early)" if fails else ""), _spread(b.frames),
                     _spread(b.visual_tokens), _spread(b.prompt_tokens), f"{b.largest_context:,}",
                     _bytes(b.cache_bytes_to_write), "yes" if b.fits else f"NO ({b.overflow})"))
    for bid in w.not_run:
        rows.append((bid, "-", "-", "-", "-", "-", "-", "NOT RUN (no data)"))
    _print_table(rows, file)
    print(file=file)
    print(engine_line(w), file=file)
    disk = "" if w.free_disk_bytes is None or w.cache_bytes_to_write <= w.free_disk_bytes else "  NOT ENOUGH DISK"
    how = f" ({w.cache.describe()})" if w.cache is not None else ""
    print(f"frame cache: {_bytes(w.cache_bytes_to_write)} to write in {w.cache_dir}{how}, "
          f"{_bytes(w.free_disk_bytes)} free{disk}", file=file)
    for warning in w.cache.warnings if w.cache is not None else ():
        print(f"frame cache: {warning}", file=file)
    for b in w.benchmarks:
        if not b.fits:
            print(f"{b.id}: {b.overflow} sample(s) do not fit; fix: {b.fix}", file=file)
        for line in fail_early_lines(b):
            print(line, file=file)
    for bid, why in w.not_run.items():
        print(f"{bid}: not run: {why}", file=file)


@dataclass(frozen=True)
class RecipeRow:
    """What one recipe costs on one benchmark (`plan --compare-recipes`): the plan's numbers, and the KV cache its
    longest sample needs, alone and at the plan's concurrency (every slot at that length: an upper bound)."""

    recipe: str
    benchmark: str
    samples: int
    frames: Spread | None
    visual_tokens: Spread | None
    prompt_tokens: Spread | None
    max_tokens: int  # the run's, its benchmarks' largest: the plan sizes every context with it
    largest_context: int
    kv_bytes_per_sequence: int
    kv_bytes_at_concurrency: int
    fits: bool


def recipe_rows(plans: Mapping[str, WorkloadPlan]) -> list[RecipeRow]:
    """One row per recipe and benchmark, from each recipe's WorkloadPlan (recipe name -> plan)."""
    rows = []
    for name, w in plans.items():
        per_token, concurrency = w.engine.kv_bytes_per_token, max(1, w.engine.concurrency)
        for b in w.benchmarks:
            kv = b.largest_context * per_token
            rows.append(RecipeRow(name, b.id, b.n_samples, b.frames, b.visual_tokens, b.prompt_tokens, w.max_tokens,
                                  b.largest_context, kv, kv * concurrency, b.fits and w.engine.fits_model))
    return rows


def print_recipe_comparison(plans: Mapping[str, WorkloadPlan], file: TextIO | None = None) -> None:
    """`plan --compare-recipes`: one row per recipe and benchmark, then each recipe's engine line."""
    file = file or sys.stdout
    table = [("recipe", "benchmark", "samples", "frames min/med/max", "visual tokens", "prompt tokens", "max tokens",
              "largest context", "KV per sequence", "KV at concurrency", "fits")]
    for r in recipe_rows(plans):
        table.append((r.recipe, r.benchmark, f"{r.samples}", _spread(r.frames), _spread(r.visual_tokens),
                      _spread(r.prompt_tokens), f"{r.max_tokens:,}", f"{r.largest_context:,}",
                      _bytes(r.kv_bytes_per_sequence), _bytes(r.kv_bytes_at_concurrency), "yes" if r.fits else "NO"))
    _print_table(table, file, left=2)
    print(file=file)
    for name, w in plans.items():
        print(f"{name}: {engine_line(w)}", file=file)
        for bid, why in w.not_run.items():
            print(f"{name}: {bid}: not run: {why}", file=file)
