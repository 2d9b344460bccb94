"""Official hub releases: read a local snapshot's annotation files and map each record to the unified format.

A card's `sources.hub.record` mapping says where question, options, answer, video and category fields live in the
official record. Every mapped record becomes a unified record (`problem`, `options`, `solution`, ...) and goes through
`samples.parse_record`, so both sources end in exactly the same `Sample`. Mapping keys (declared in
record_mapping.py, which the card loader reads them into):

    id: "{Question ID}"            template over record fields (dotted paths allowed: "{meta.id}"); default "{_index}"
    question: Question              a field name, or a template when it contains "{"
    options: Options               or {field, kind: list|dict|columns|embedded, columns: [...], sep: ". "}
    answer: Answer                 or {field, kind: letter|index|raw|time_span, if_null: text}; letter also accepts
                                   option text; `if_null` stands for a null answer (VideoReasonBench)
    video: "{video ID}.mp4"        template; `video_ext` is appended when the result has no extension, and with
                                   `video_search: true` a file not at that path is looked up by name below video_dir
    task_type: multiple choice     a constant, {field, map, default}, or {with_options, without_options}
    start / end: field names       seconds: the clip window
    image: field                   a path, or an embedded image ({bytes, path}) that is written next to the snapshot
    fields: {name: field|template} extra fields, named as in the unified files so aggregation works for both
    vars: {name: {from, map, default}}  look-up tables evaluated first (MVBench task -> video folder)
    explode: qa                    a list field whose items become records (item keys override the parent's)
    filter / exclude: {field: value | [values]}
    records: dict_by_id            the file is {id: record}; the key is available as `_key`

Pseudo-fields: `_index` (record position in its file), `_file` (file stem), `_dir` (parent folder name), `_key`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..samples import OPTION_LABEL, OPTION_PREFIX, read_records
from .cards import HubFile, HubSource
from .record_mapping import AnswerSpec, OptionsSpec, RecordMapping, TaskTypeSpec

_TEMPLATE = re.compile(r"\{([^{}]+)\}")
_LETTERED = OPTION_PREFIX
_EMBEDDED_OPTION = re.compile(rf"^\s*{OPTION_LABEL}[\.\):：]\s+(.*\S)\s*$", re.ASCII)
_LETTER_ONLY = re.compile(r"^\(?([A-Z])\)?[\.\):]?$")
_MISSING = object()


def lookup(record: Mapping[str, Any], path: str) -> Any:
    """A field by name, falling back to a dotted path ("meta.width"); `_MISSING` when absent."""
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def render(template: str, record: Mapping[str, Any]) -> str:
    def sub(m: re.Match) -> str:
        value = lookup(record, m.group(1))
        if isinstance(value, list) and len(value) == 1:  # LongVideo-Reason's `videos` is a one-item list
            value = value[0]
        if value is _MISSING or value is None or isinstance(value, (list, dict)):
            raise SampleError(FailureKind.RECORD_INVALID,
                              f"field {m.group(1)!r} (used in {template!r}) is missing or not a value")
        return str(value)

    return _TEMPLATE.sub(sub, template)


def _value(record: Mapping[str, Any], spec: str) -> Any:
    """A field name, or a template when the spec contains braces."""
    if "{" in spec:
        return render(spec, record)
    value = lookup(record, spec)
    return None if value is _MISSING else value


def _matches(record: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    for key, wanted in conditions.items():
        value = lookup(record, key)
        accepted = wanted if isinstance(wanted, (list, tuple)) else [wanted]
        if str(value).lower() not in {str(a).lower() for a in accepted}:
            return False
    return True


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, list) else None
    return None


def _letter(i: int) -> str:
    if i >= 26:
        raise SampleError(FailureKind.RECORD_INVALID, "more than 26 options")
    return chr(ord("A") + i)


def _lettered(texts: list[str], sep: str) -> list[str]:
    """Prefix bare option texts with letters; options that already carry a letter prefix are kept as written."""
    texts = [str(t) for t in texts]
    if texts and all(_LETTERED.match(t) for t in texts):
        return texts
    return [f"{_letter(i)}{sep}{t}" for i, t in enumerate(texts)]


def split_embedded_options(text: str) -> tuple[str, list[str]]:
    """Split "question\\nA. x\\nB. y" into the question and its option lines (MotionBench, MLVU, TempCompass)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _EMBEDDED_OPTION.match(line)), None)
    if first is None:
        return text, []
    options = [line.strip() for line in lines[first:] if _EMBEDDED_OPTION.match(line)]
    letters = [_EMBEDDED_OPTION.match(o).group(1) for o in options]
    if letters != [_letter(i) for i in range(len(letters))]:
        return text, []  # not a clean A, B, C... run: leave the text alone rather than guess
    return "\n".join(lines[:first]).rstrip(), options


def _options(record: Mapping[str, Any], spec: str | OptionsSpec | None, question: str) -> tuple[str, list[str]]:
    if spec is None:
        return question, []
    spec = OptionsSpec(field=spec) if isinstance(spec, str) else spec
    if spec.kind == "embedded":
        return split_embedded_options(question)
    if spec.kind == "columns":
        texts = [lookup(record, c) for c in spec.columns or ()]
        return question, _lettered([t for t in texts if t not in (None, "", _MISSING)], spec.sep)
    field = str(spec.field)  # set for the other kinds (OptionsSpec checks)
    raw = lookup(record, field)
    if raw is _MISSING or raw is None:
        return question, []
    if spec.kind == "dict":
        if not isinstance(raw, Mapping):
            raise SampleError(FailureKind.RECORD_INVALID, f"{field} must be a mapping letter -> text")
        items = sorted((str(k).strip(), v) for k, v in raw.items() if v not in (None, ""))
        return question, [f"{k}{spec.sep}{v}" for k, v in items]
    texts = _as_list(raw)
    if texts is None:
        raise SampleError(FailureKind.RECORD_INVALID, f"{field} must be a list of options, got {raw!r:.80}")
    return question, _lettered(texts, spec.sep)


def _strip_answer_tag(text: str) -> str:
    m = re.fullmatch(r"\s*<answer>(.*)</answer>\s*", text, re.S)
    return m.group(1).strip() if m else text.strip()


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def answer_letter(value: Any, options: list[str]) -> str:
    """The option letter a release's answer names: "B", "(B)", the full option "B. text", or the option text."""
    pairs = [(m.group(1), o, o[m.end():]) for o in options for m in [_LETTERED.match(o)] if m]
    text = _strip_answer_tag(str(value))
    m = _LETTER_ONLY.match(text)
    if m and any(m.group(1) == letter for letter, _, _ in pairs):
        return m.group(1)
    for letter, option, body in pairs:
        if _norm(text) in (_norm(option), _norm(body)):
            return letter
    raise SampleError(FailureKind.RECORD_INVALID,
                      f"answer {text!r:.60} names none of the options "
                      f"{', '.join(letter for letter, _, _ in pairs)}")


def _solution(record: Mapping[str, Any], spec: str | AnswerSpec, options: list[str]) -> str:
    spec = AnswerSpec(field=spec) if isinstance(spec, str) else spec
    kind = spec.kind
    value = lookup(record, spec.field)
    if value is None and spec.if_null is not None:  # a null answer the card declares meaningful
        value = spec.if_null
    if value is _MISSING or value is None:
        raise SampleError(FailureKind.RECORD_INVALID, f"answer field {spec.field!r} is missing")
    if kind == "index":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(options):
            raise SampleError(FailureKind.RECORD_INVALID,
                              f"answer index {value!r} is outside the {len(options)} options")
        answer = _LETTERED.match(options[value]).group(1)
    elif kind == "letter" and options:
        answer = answer_letter(value, options)
    elif kind == "time_span":
        span = _as_list(value)
        if not span or len(span) != 2:
            raise SampleError(FailureKind.RECORD_INVALID, f"time span must be [start, end], got {value!r}")
        answer = json.dumps({"time": [float(span[0]), float(span[1])]})
    elif kind in ("letter", "raw"):
        answer = _strip_answer_tag(str(value))
    else:
        raise UserError(f"unknown answer kind {kind!r} in a hub record mapping")
    return f"<answer>{answer}</answer>"


def _task_type(record: Mapping[str, Any], spec: str | TaskTypeSpec, has_options: bool) -> str:
    if isinstance(spec, str):
        return spec
    if spec.field is None:  # then both of these are set (TaskTypeSpec checks)
        return str(spec.with_options if has_options else spec.without_options)
    raw = lookup(record, spec.field)
    table = {str(k).lower(): v for k, v in spec.map.items()}  # YAML reads `true:` as a bool
    key = str(raw).lower()
    if key in table:
        return table[key]
    if spec.default is not None:
        return spec.default
    if raw not in (None, _MISSING):
        return str(raw)
    raise SampleError(FailureKind.RECORD_INVALID, f"cannot tell the task type from {spec!r}")


def _image(record: Mapping[str, Any], field: str, image_store: Path) -> str | None:
    value = lookup(record, field)
    if value in (None, "", _MISSING):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and value.get("bytes"):
        data = bytes(value["bytes"])
        suffix = Path(str(value.get("path") or "image.png")).suffix or ".png"
        name = hashlib.sha256(data).hexdigest()[:24] + suffix
        image_store.mkdir(parents=True, exist_ok=True)
        target = image_store / name
        if not target.exists():  # content-addressed: an existing file already holds these bytes
            tmp = target.with_suffix(target.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        return f"{image_store.name}/{name}"
    raise SampleError(FailureKind.RECORD_INVALID, f"image field {field!r} is neither a path nor an embedded image")


def to_unified(record: Mapping[str, Any], mapping: RecordMapping, image_store: Path) -> dict[str, Any]:
    """Map one official record (pseudo-fields already set) to a unified record."""
    rec = dict(record)
    for name, var in (mapping.vars or {}).items():
        key = str(lookup(rec, var.from_))
        rec[name] = var.map.get(key, _MISSING if var.default is None else var.default)
        if rec[name] is _MISSING:
            raise SampleError(FailureKind.RECORD_INVALID, f"{var.from_}={key!r} is not in the {name} table")
    question = str(_value(rec, mapping.question) or "") if mapping.question else ""
    question, options = _options(rec, mapping.options, question)
    task_type = _task_type(rec, "multiple choice" if mapping.task_type is None else mapping.task_type, bool(options))
    if task_type == "multiple choice" and not options:
        raise SampleError(FailureKind.RECORD_INVALID, "a multiple-choice record without options")
    out: dict[str, Any] = {
        "problem_id": render("{_index}" if mapping.id is None else mapping.id, rec),
        "problem": question,
        "options": options,
        "problem_type": task_type,
        "solution": _solution(rec, "answer" if mapping.answer is None else mapping.answer, options),
        "data_type": "video",
    }
    if mapping.video is not None:
        video = render(mapping.video, rec)
        if mapping.video_ext and not Path(video).suffix:
            video += mapping.video_ext
        out["path"] = video
    for key, spec in (("start", mapping.start), ("end", mapping.end)):
        if spec is not None and _value(rec, spec) not in (None, ""):
            out[key] = _value(rec, spec)
    if mapping.image is not None:
        image = _image(rec, mapping.image, image_store)
        if image:
            out["image_path"] = image
    for name, spec in (mapping.fields or {}).items():
        value = _value(rec, spec)
        if value is not None:
            out[name] = value
    return out


def read_table(path: Path) -> list[Any]:
    """Records of one annotation file: JSON, JSONL or parquet (read with pyarrow, the `datasets` backend)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return read_records(path)


def annotation_files(snapshot: Path, hub: HubSource) -> list[tuple[Path, HubFile]]:
    found: list[tuple[Path, HubFile]] = []
    for spec in hub.files:
        for path in sorted(snapshot.glob(spec.glob)):
            if path.is_file() and all(path != p for p, _ in found):
                found.append((path, spec))
    return found


def _raw_records(path: Path, mapping: RecordMapping) -> Iterator[dict[str, Any]]:
    data = read_table(path)
    if mapping.records == "dict_by_id":
        data = [dict(v, _key=k) for item in data if isinstance(item, Mapping) for k, v in item.items()]
    explode = mapping.explode
    for i, rec in enumerate(data):
        if not isinstance(rec, Mapping):
            yield {"_invalid": f"record #{i} of {path.name} is a {type(rec).__name__}, not an object"}
            continue
        base = {**rec, "_file": path.stem.split("-0000")[0], "_dir": path.parent.name}
        items = rec.get(explode) if explode else [None]
        for item in items if isinstance(items, list) else [None]:
            yield {**base, **item} if isinstance(item, Mapping) else base


class VideoFinder:
    """Find a video by file name anywhere below the video root (VideoMMMU files sit in per-discipline folders)."""

    def __init__(self, root: Path):
        self.root = root
        self._index: dict[str, str] | None = None

    def find(self, relative: str) -> str:
        if (self.root / relative).is_file():
            return relative
        if self._index is None:  # walked once, and only when some video is not where the record says
            self._index = {}
            if self.root.is_dir():
                for path in sorted(self.root.rglob("*")):
                    if path.is_file():
                        self._index.setdefault(path.name, path.relative_to(self.root).as_posix())
        return self._index.get(Path(relative).name, relative)


def load_hub_records(snapshot: Path, hub: HubSource, video_root: Path) -> list[Any]:
    """Unified records from a snapshot, in file order; an unmappable record stays in the list as its error."""
    from .quirks import HUB_HOOKS, HubContext

    if hub.hook is not None and hub.hook not in HUB_HOOKS:
        raise UserError(f"unknown hub hook {hub.hook!r}; known: {', '.join(sorted(HUB_HOOKS))}")
    files = annotation_files(snapshot, hub)
    if not files:
        globs = ", ".join(f.glob for f in hub.files)
        raise UserError(f"no annotation files matching {globs} in {snapshot}; run `vbench-async data fetch` "
                        f"or copy the release of {hub.repo} there")
    out: list[Any] = []
    image_store = snapshot / ".vbench-images"
    ctx = HubContext(snapshot, video_root)
    finder = VideoFinder(video_root)
    for path, spec in files:
        mapping = spec.record.over(hub.record)
        filters, excludes = mapping.filter or {}, mapping.exclude or {}
        for rec in _raw_records(path, mapping):
            if "_invalid" in rec:
                out.append(SampleError(FailureKind.RECORD_INVALID, rec["_invalid"]))
                continue
            if (filters and not _matches(rec, filters)) or (excludes and _matches(rec, excludes)):
                continue
            rec["_index"] = len(out)
            try:
                if hub.hook is not None:
                    out.extend(HUB_HOOKS[hub.hook](rec, ctx))
                else:
                    unified = to_unified(rec, mapping, image_store)
                    if mapping.video_search and "path" in unified:
                        unified["path"] = finder.find(unified["path"])
                    out.append(unified)
            except SampleError as exc:
                exc.sample_id = f"#{rec['_index']}"
                out.append(exc)
            if hub.limit is not None and len(out) >= hub.limit:
                return out[: hub.limit]
    return out
