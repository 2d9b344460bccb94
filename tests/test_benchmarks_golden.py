"""Per-benchmark golden tests on the project's own fixtures (tests/fixtures/benchmarks/golden/*.yaml).

Each fixture holds a few hand-written records in the predecessor's unified format and the same questions in the
official release's layout. Both sources are loaded through the real registry from a data root built in tmp_path
(hub releases as JSON, JSONL or parquet, as the release ships them), and must give the expected samples, the exact
prompt text, the expected scores for known model outputs (real scorers), and the expected official aggregate.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from vbench_async.benchmarks import get_benchmark
from vbench_async.samples import Sample
from vbench_async.scoring import score

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "benchmarks" / "golden"
FIXTURES = sorted(p.stem for p in GOLDEN.glob("*.yaml"))


def load_fixture(name: str) -> dict:
    return yaml.safe_load((GOLDEN / f"{name}.yaml").read_text(encoding="utf-8"))


def _png(color: tuple[int, int, int]) -> dict:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": "figure.png"}


def _materialise(value: Any) -> Any:
    """Fixture markers for values YAML cannot hold: "__PNG_RED__" becomes an embedded PNG (parquet image struct)."""
    if value == "__PNG_RED__":
        return _png((255, 0, 0))
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_materialise(v) for v in value]
    return value


def write_file(path: Path, records: Any) -> None:
    """Write records the way a release ships them: .json array/object, .jsonl lines, or .parquet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = _materialise(records)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        path.write_text(json.dumps(records), encoding="utf-8")


def build_data_root(fx: dict, source: str, root: Path) -> Path:
    bench = get_benchmark(fx["benchmark"])
    if source == "unified":
        name = fx["unified"].get("file") or bench.card.sources.unified.annotation
        write_file(root / name, fx["unified"]["records"])
    else:
        owner, repo = bench.card.sources.hub.repo.split("/")
        for rel, records in fx["hub"]["files"].items():
            write_file(root / "hub" / owner / repo / rel, records)
    return root


def cases() -> list[tuple[str, str]]:
    return [(name, source) for name in FIXTURES for source in ("unified", "hub") if source in load_fixture(name)]


def _per_source(value: Any, source: str) -> Any:
    if isinstance(value, dict) and set(value) <= {"unified", "hub"} and value:
        return value.get(source)
    return value


def assert_close(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected a mapping, got {actual!r}"
        for key, value in expected.items():
            assert str(key) in {str(k) for k in actual}, f"{where}: missing key {key!r} in {sorted(actual)}"
            match = next(v for k, v in actual.items() if str(k) == str(key))
            assert_close(match, value, f"{where}.{key}")
    elif isinstance(expected, float) or (isinstance(expected, int) and isinstance(actual, float)):
        ok = actual is not None and math.isclose(actual, expected, abs_tol=1e-6)
        assert ok, f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def check_sample(sample: Sample, expected: dict, source: str, where: str) -> None:
    for key, value in expected.items():
        per_source = isinstance(value, dict) and set(value) <= {"unified", "hub"} and value
        value = _per_source(value, source)
        if per_source and value is None:
            continue  # checked for the other source only
        if key == "id":
            assert sample.sample_id == str(value), where
        elif key == "video":
            assert Path(sample.video) == Path(value), f"{where}: video {sample.video!r}"
        elif key == "window":
            assert_close(list(sample.window) if sample.window else None, value, f"{where}.window")
        elif key in ("options", "images"):
            assert list(getattr(sample, key)) == value, f"{where}.{key}"
        elif key.startswith("fields"):
            if key in ("fields", f"fields_{source}"):
                assert_close(dict(sample.fields), value, f"{where}.fields")
        else:
            assert getattr(sample, key) == value, f"{where}.{key}"


def result_dicts(samples: list[Sample], fx: dict, source: str) -> list[dict]:
    """Result lines as the pipeline stores them, scored by the real scorer; `failures` marks failed samples."""
    failures = set(fx.get("failures", []))
    out = []
    for i, (sample, output) in enumerate(zip(samples, _per_source(fx["predictions"], source))):
        s = score(sample, output)
        failed = i in failures
        out.append({
            "sample_id": sample.sample_id, "task_type": sample.task_type, "answer": sample.answer,
            "fields": dict(sample.fields), "output": None if failed else output,
            "extracted": None if failed else s.extracted, "score": None if failed else s.value,
            "details": {} if failed else s.details,
            "error": {"kind": "decode_error", "message": "fixture failure"} if failed else None,
        })
    return out


@pytest.mark.parametrize("name,source", cases())
def test_golden(name: str, source: str, tmp_path: Path) -> None:
    fx = load_fixture(name)
    bench = get_benchmark(fx["benchmark"])
    root = build_data_root(fx, source, tmp_path / "data")
    items = bench.load_samples(root)
    assert bench.resolve_source(root).kind == source  # auto picks the only source present
    errors = [i for i in items if not isinstance(i, Sample)]
    assert not errors, [str(e) for e in errors]
    assert len(items) == len(fx["samples"])
    for i, expected in enumerate(fx["samples"]):
        check_sample(items[i], expected, source, f"{name}[{source}] sample {i}")

    assert bench.render_prompt(items[0]) == _per_source(fx["prompt"], source)
    if "prompt_thinking" in fx:
        assert bench.render_prompt(items[0], thinking=True) == _per_source(fx["prompt_thinking"], source)
    for extra in fx.get("extra_prompts", []):
        assert bench.render_prompt(items[extra["index"]], thinking=extra.get("thinking", False)) == extra["text"]

    predictions, scores = _per_source(fx["predictions"], source), _per_source(fx["scores"], source)
    assert len(predictions) == len(items) == len(scores)
    for i, (sample, output, expected) in enumerate(zip(items, predictions, scores)):
        got = score(sample, output).value
        assert math.isclose(got, expected, abs_tol=1e-6), f"{name}[{source}] sample {i}: score {got} != {expected}"

    agg = bench.aggregate(result_dicts(items, fx, source))
    assert_close(agg, fx["aggregate"], f"{name}[{source}] aggregate")
    assert_close(agg, fx.get(f"aggregate_{source}", {}), f"{name}[{source}] aggregate")
    for key in fx.get(f"absent_{source}", []):
        assert key not in agg, f"{name}[{source}]: unexpected {key} in aggregate"


def test_every_benchmark_has_a_golden_fixture() -> None:
    from vbench_async.benchmarks import list_benchmarks

    real = {b for b in list_benchmarks() if not get_benchmark(b).card.synthetic}
    covered = {get_benchmark(load_fixture(n)["benchmark"]).card.base_id for n in FIXTURES}
    assert real <= covered, f"benchmarks without golden fixtures: {sorted(real - covered)}"
    for name in FIXTURES:
        fx = load_fixture(name)
        card = get_benchmark(fx["benchmark"]).card
        assert ("hub" in fx) == (card.sources.hub is not None), f"{name}: fixture must cover every source of the card"
