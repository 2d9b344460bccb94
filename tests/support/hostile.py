"""Builders of hostile and broken inputs for the reliability and security tests: videos, annotation records, cache
entries, and small unified-format suites to run them through `vbench-async run`.

Every case says what a correct system does with it: `OK` (it decodes / is rebuilt and the sample is answered), or a
set of acceptable `SampleError` kinds (a clear, recorded error). Nothing here mocks a component: the videos are real
files written with PyAV, the records are bytes on disk, the cache entries are real entries damaged in place.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import av
import numpy as np
from support.videos import truncate, write_audio_only, write_video

OK = frozenset({"ok"})  # the sample must be answered (no error)
# A prompt longer than the model's context: planned and recorded before any request (in process), or refused over
# HTTP (a 400 from vLLM's server).
REJECTED = frozenset({"context_overflow", "engine_error", "server_error"})
CARD = "mmvu"  # a unified-source card whose prompt routing has a default: any task type gets a prompt
XSS = '<script>alert("vb-xss")</script><img src=x onerror="vbXss()">'
JINJA = "{{ 7*7 }} {% for x in range(3) %}LOOP{% endfor %} {{ cycler.__init__.__globals__ }}"

# ----------------------------------------------------------------------------------------------- small suites


def unified_suite(folder: Path, records: list[dict[str, Any]] | None = None, *, n_videos: int = 3,
                  questions_per_video: int = 2, seed: int = 1, max_s: float = 4.0,
                  annotation: str = "annotations.json") -> Path:
    """A data map for `--data-root`: the `CARD` benchmark reads `records` from `annotation`, videos from `videos/`.

    Without `records`, the demo generator writes `n_videos` short videos and their questions (all six task types,
    exact ground truth) and those are the records. Returns the data map path.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if records is None:
        from vbench_async.demo.suite import generate_suite

        generate_suite(folder, n_videos=n_videos, questions_per_video=questions_per_video, seed=seed,
                       min_s=min(2.0, max_s), max_s=max_s, workers=1)
        records = [r for f in sorted((folder / "annotations").glob("*.json")) for r in json.loads(f.read_text())]
    (folder / annotation).write_text(json.dumps(records))
    return write_data_map(folder, annotation)


def write_data_map(folder: Path, annotation: str, video_dir: str = "videos") -> Path:
    data_map = folder / "data-map.yaml"
    data_map.write_text(json.dumps({"root": str(folder.absolute()),
                                    "benchmarks": {CARD: {"annotation": annotation, "video_dir": video_dir}}}))
    return data_map  # JSON is YAML


def run_args(data_map: Path, out: Path, cache: Path, *extra: str, max_tokens: int = 8) -> list[str]:
    """`vbench-async run` arguments for a small suite with the tiny Qwen2.5-VL model (few frames, short answers)."""
    return ["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", CARD, "--data-root", str(data_map),
            "--output-dir", str(out), "--cache-dir", str(cache), "--max-tokens", str(max_tokens),
            "--max-frames", "4", "--max-pixels", "16384", "--no-progress", *extra]


# ----------------------------------------------------------------------------------------------- videos


@dataclass(frozen=True)
class VideoCase:
    name: str
    build: Callable[[Path, Path], str]  # (video folder, scratch folder outside it) -> path as written in the record
    expect: frozenset[str]  # OK, or the acceptable error kinds
    window: tuple[float, float] | None = None


def _video(path: Path, **kw: Any) -> Path:
    return write_video(path, **{"frames": 24, "fps": 12, "width": 64, "height": 48, **kw})


def _at(name: str, make: Callable[[Path], Any]) -> Callable[[Path, Path], str]:
    def build(videos: Path, scratch: Path) -> str:
        make(videos / name)
        return name
    return build


def _zero_frames(path: Path) -> None:
    """A video stream that holds no frame (Matroska keeps an empty stream; the audio makes the muxer write it)."""
    with av.open(str(path), "w", format="matroska") as container:
        video = container.add_stream("libx264", rate=12)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = container.add_stream("aac", rate=16000)
        audio.layout = "mono"
        for i in range(8):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, i * 1024
            container.mux(audio.encode(frame))
        container.mux(audio.encode())


def _other_container(path: Path) -> None:
    """A Matroska file named .mp4 (the extension lies; the content is a fine video)."""
    with av.open(str(path), "w", format="matroska") as container:
        stream = container.add_stream("mpeg4", rate=12)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(12):
            img = np.full((48, 64, 3), i * 20, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        container.mux(stream.encode())


def _png_as_mp4(path: Path) -> None:
    from PIL import Image

    Image.fromarray(np.full((48, 64, 3), 128, np.uint8)).save(path, format="PNG")


def _zero_middle(path: Path) -> None:
    _video(path, frames=48)
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 512] = bytes(512)  # zeroed bytes inside the coded frames
    path.write_bytes(bytes(data))


def _sparse(size: int) -> Callable[[Path], None]:
    """A file of `size` zero bytes (sparse: costs no disk): no decoder may read it whole."""
    def make(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)
    return make


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # opening it for reading would block forever


def _symlink_out(videos: Path, scratch: Path) -> str:
    target = _video(scratch / "outside.mp4")
    (videos / "link_out.mp4").symlink_to(target)
    return "link_out.mp4"


def _symlink_loop(videos: Path, scratch: Path) -> str:
    (videos / "loop_a.mp4").symlink_to("loop_b.mp4")
    (videos / "loop_b.mp4").symlink_to("loop_a.mp4")
    return "loop_a.mp4"


def _dangling(videos: Path, scratch: Path) -> str:
    (videos / "dangling.mp4").symlink_to(videos / "never_written.mp4")
    return "dangling.mp4"


def _dotdot(videos: Path, scratch: Path) -> str:
    return os.path.relpath(_video(scratch / "up.mp4"), videos)  # "../outside/up.mp4"


def _absolute(videos: Path, scratch: Path) -> str:
    return str(_video(scratch / "absolute.mp4").absolute())


VIDEO_CASES: list[VideoCase] = [
    VideoCase("missing", lambda videos, scratch: "not_there.mp4", frozenset({"video_missing"})),
    VideoCase("empty", _at("empty.mp4", lambda p: p.write_bytes(b"")), frozenset({"video_empty"})),
    VideoCase("truncated_half", _at("trunc50.mp4", lambda p: truncate(_video(p), 0.5)), frozenset({"decode_error"})),
    VideoCase("truncated_tail", _at("trunc97.mp4", lambda p: truncate(_video(p, frames=96), 0.97)),
              frozenset({"decode_error", "video_empty"}) | OK),
    VideoCase("text_as_mp4", _at("text.mp4", lambda p: p.write_text("this is not a video\n" * 50)),
              frozenset({"decode_error"})),
    VideoCase("random_bytes", _at("noise.mp4", lambda p: p.write_bytes(np.random.default_rng(0).bytes(300_000))),
              frozenset({"decode_error", "no_video_stream"})),
    VideoCase("png_as_mp4", _at("image.mp4", _png_as_mp4), frozenset({"decode_error"}) | OK),
    VideoCase("matroska_as_mp4", _at("mkv.mp4", _other_container), OK),
    VideoCase("audio_only", _at("audio.mp4", lambda p: write_audio_only(p, 1.0)), frozenset({"no_video_stream"})),
    VideoCase("zero_frames", _at("noframes.mp4", _zero_frames), frozenset({"video_empty"})),
    VideoCase("thin_1000x4", _at("thin.mp4", lambda p: _video(p, width=1000, height=4, frames=6)),
              frozenset({"aspect_ratio"})),
    VideoCase("tiny_2x2", _at("tiny.mp4", lambda p: _video(p, width=2, height=2, frames=6)), OK),
    VideoCase("one_frame_per_hour", _at("slow.mp4", lambda p: _video(p, frames=3, fps=Fraction(1, 3600))), OK),
    VideoCase("20000_frames", _at("many.mp4", lambda p: _video(p, frames=20000, fps=1000, width=16, height=16,
                                                                 gop=250)), OK),
    VideoCase("zeroed_middle", _at("damaged.mp4", _zero_middle), frozenset({"decode_error"}) | OK),
    VideoCase("sparse_256mib", _at("big.mp4", _sparse(256 << 20)), frozenset({"decode_error", "no_video_stream"})),
    VideoCase("sparse_4gib", _at("huge.mp4", _sparse(4 << 30)), frozenset({"decode_error", "no_video_stream"})),
    VideoCase("directory", _at("folder.mp4", lambda p: p.mkdir()), frozenset({"video_missing"})),
    VideoCase("fifo", _at("pipe.mp4", _fifo), frozenset({"video_missing"})),
    VideoCase("window_past_end", _at("short.mp4", _video), frozenset({"window_invalid"}), window=(100.0, 200.0)),
    VideoCase("dangling_symlink", _dangling, frozenset({"video_missing", "path_unsafe"})),
    VideoCase("symlink_out_of_root", _symlink_out, frozenset({"path_unsafe"})),
    VideoCase("symlink_loop", _symlink_loop, frozenset({"path_unsafe", "video_missing"})),
    VideoCase("dotdot_path", _dotdot, frozenset({"path_unsafe"})),
    VideoCase("absolute_path", _absolute, frozenset({"path_unsafe"})),
]


def build_videos(videos: Path, scratch: Path, cases: list[VideoCase] = VIDEO_CASES) -> dict[str, str]:
    """Write every case into `videos` (files meant to be outside the root go to `scratch`); case -> record path."""
    videos.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    return {case.name: case.build(videos, scratch) for case in cases}


# ----------------------------------------------------------------------------------------------- images


@dataclass(frozen=True)
class ImageCase:
    name: str
    file: str  # file name inside the image folder (the extension may lie)
    make: Callable[[Path], Any]
    expect: frozenset[str]


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    import zlib

    return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")


def _bomb_png(path: Path) -> None:
    """A 69-byte PNG whose header claims 20000 x 20000 pixels: PIL raises DecompressionBombError (not an OSError)."""
    import zlib

    ihdr = (20000).to_bytes(4, "big") * 2 + bytes([1, 0, 0, 0, 0])  # 1-bit greyscale
    data = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", zlib.compress(b"")) + \
        _png_chunk(b"IEND", b"")
    path.write_bytes(data)


def _pil(mode: str, fmt: str, size: tuple[int, int] = (40, 30), **save: Any) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        from PIL import Image

        rng = np.random.default_rng(len(mode))
        if mode in ("I;16", "I"):
            img = Image.fromarray(rng.integers(0, 65535, size[::-1], dtype=np.uint16))  # mode I;16
            if mode == "I":
                img = img.convert("I")
        else:
            img = Image.new(mode, size)
            img.putdata([tuple(int(v) for v in rng.integers(0, 256, len(mode)))
                         if len(mode) > 1 else int(rng.integers(0, 256)) for _ in range(size[0] * size[1])])
        img.save(path, format=fmt, **save)
    return make


def _truncated_png(path: Path) -> None:
    _pil("RGB", "PNG", (64, 48))(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


IMAGE_CASES: list[ImageCase] = [
    ImageCase("decompression_bomb", "bomb.png", _bomb_png, frozenset({"image_too_large"})),
    ImageCase("truncated_png", "half.png", _truncated_png, frozenset({"decode_error"})),
    ImageCase("png_named_jpg", "png.jpg", _pil("RGB", "PNG"), OK),
    ImageCase("text_named_png", "text.png", lambda p: p.write_text("not an image\n"), frozenset({"decode_error"})),
    ImageCase("cmyk_jpeg", "cmyk.jpg", _pil("CMYK", "JPEG"), OK),
    ImageCase("grey_16_bit_png", "grey16.png", _pil("I;16", "PNG"), OK),
    ImageCase("grey_32_bit_tiff", "grey32.tiff", _pil("I", "TIFF"), OK),
    ImageCase("rgba_png", "alpha.png", _pil("RGBA", "PNG"), OK),
    ImageCase("grey_alpha_png", "la.png", _pil("LA", "PNG"), OK),
    ImageCase("palette_with_transparency", "palette.png", _pil("P", "PNG", transparency=0), OK),
    ImageCase("one_pixel", "dot.png", _pil("RGB", "PNG", (1, 1)), OK),
    ImageCase("missing", "not_there.png", lambda p: None, frozenset({"video_missing"})),
]


def build_images(images: Path, cases: list[ImageCase] = IMAGE_CASES) -> dict[str, str]:
    """Write every image case into `images`; case name -> file name."""
    images.mkdir(parents=True, exist_ok=True)
    for case in cases:
        case.make(images / case.file)
    return {case.name: case.file for case in cases}


# ----------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordCase:
    name: str
    line: bytes  # one JSONL line, exactly as written (may be invalid JSON or invalid UTF-8)
    expect: frozenset[str]
    sample_id: str = "#{i}"  # the id its result must carry; "{i}" is the record's position in the file
    engine: bool = False  # the outcome is the engine's to decide (a prompt longer than its context)


_DROP = object()  # a key to leave out
BAD = frozenset({"record_invalid"})


def _good(pid: Any, **changes: Any) -> dict[str, Any]:
    rec = {"problem_id": pid, "problem": "Which colour is the square?", "problem_type": "multiple choice",
           "options": ["A. red", "B. green", "C. blue", "D. white"], "solution": "<answer>A</answer>",
           "path": "good.mp4", "subject": "control"}
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not _DROP}


def _case(name: str, expect: frozenset[str], **changes: Any) -> RecordCase:
    rec = _good(f"rec-{name}", **changes)
    return RecordCase(name, json.dumps(rec).encode(), expect, str(rec["problem_id"]))


def _raw(name: str, line: bytes, expect: frozenset[str] = BAD, sample_id: str = "#{i}") -> RecordCase:
    return RecordCase(name, line, expect, sample_id)


def _bad_utf8_line(name: str, text: bytes) -> RecordCase:
    line = (b'{"problem_id": "rec-%s", "problem": "%s", "problem_type": "multiple choice", '
            b'"options": ["A. x", "B. y"], "solution": "A", "path": "good.mp4"}') % (name.encode(), text)
    return RecordCase(name, line, BAD, f"rec-{name}")


LONG = "word " * 12000  # ~12k tokens: longer than the engine's context

RECORD_CASES: list[RecordCase] = [
    _case("missing_problem_type", BAD, problem_type=_DROP),  # first: it must not decide the format of the file
    _case("control", OK),
    _case("missing_solution", BAD, solution=_DROP),
    _case("problem_type_int", BAD, problem_type=7),
    _case("problem_type_blank", BAD, problem_type="   "),
    _case("problem_is_list", BAD, problem=["a", "b"]),
    _case("solution_is_dict", BAD, solution={"answer": "A"}),
    _case("solution_is_bool", BAD, solution=True),
    _case("options_is_dict", BAD, options={"A": "red"}),
    _case("options_unparsable_string", BAD, options="A. red; B. green"),
    _case("options_not_strings", BAD, options=[1, 2, 3]),
    _case("mc_without_options", BAD, options=[]),
    _case("solution_not_an_option", BAD, solution="<answer>Z</answer>"),
    _case("numerical_solution_unreadable", BAD, problem_type="numerical", options=[], solution="<answer>lots</answer>"),
    _case("unknown_task_type", BAD | {"task_type_mismatch"}, problem_type="interpretive dance"),
    _case("path_is_int", BAD, path=12),
    _case("path_is_blank", BAD, path=""),
    _case("start_is_nan", BAD, start="nan"),
    _case("start_negative", BAD, start=-3),
    _case("end_before_start", BAD, start=3, end=1),
    replace(_case("very_long_question", REJECTED, problem=LONG), engine=True),
    replace(_case("very_long_options", REJECTED | OK,
                  options=[f"{c}. " + "x" * 6000 for c in "ABCD"]), engine=True),
    _case("very_long_solution", OK, solution="<answer>A</answer>" + " " * 200_000),
    _case("control_characters", OK, problem="What\x00 is\x1b[31m this\u202e? \ufeff\u200b"),
    _case("jinja_in_question", OK, problem=JINJA, subject=JINJA),
    _case("html_everywhere", OK, problem=XSS, options=[f"A. {XSS}", "B. b"], subject=XSS),
    _case("image_path_escapes", frozenset({"path_unsafe"}), image_path="../../../../etc/passwd"),
    _case("nested_extras", OK, extra={"deep": [[{"a": [1, 2, {"b": None}]}]]}, duration=1e308),
    _case("id_with_newline_and_dots", OK, problem_id="../../etc/passwd\nnext"),
    _bad_utf8_line("lone_surrogate_escape", b"a \\ud800 b"),
    _bad_utf8_line("non_utf8_bytes", b"caf\xe9 \xff\xfe"),
    RecordCase("unicode_line_separators", json.dumps(_good("rec-unicode_line_separators", problem="one\u2028two"
               "\x85three\x0cfour"), ensure_ascii=False).encode(), OK, "rec-unicode_line_separators"),
    _raw("broken_json", b'{"problem_id": "rec-broken_json", "problem": "unterminated'),
    _raw("deeply_nested_json", b"[" * 100_000 + b"]" * 100_000),
    _raw("record_is_list", b'["problem", "solution"]'),
    _raw("record_is_number", b"42"),
    _raw("record_is_null", b"null"),
    _raw("bool_problem_id", json.dumps(_good(True)).encode(), OK, "{i}"),  # a bool is no id: the position is
]


def write_records(path: Path, cases: list[RecordCase], extra: list[dict[str, Any]] = ()) -> dict[str, RecordCase]:
    """Write every case, then the control case again (a duplicate id), then `extra` records, one per line, after a
    UTF-8 byte-order mark; returns result id -> case."""
    lines: list[bytes] = []
    ids: dict[str, RecordCase] = {}
    for case in cases:
        ids[case.sample_id.format(i=len(lines))] = case
        lines.append(case.line)
    control = next(c for c in cases if c.name == "control")
    lines.append(control.line)
    ids[f"{control.sample_id}#2"] = control
    lines += [json.dumps(r).encode() for r in extra]
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # with a byte-order mark, as some editors save
    return ids


# ----------------------------------------------------------------------------------------------- cache entries


def _header(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + size]), data[8 + size:]


def _write(path: Path, header: dict[str, Any], body: bytes) -> None:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + body)


def _patch_meta(path: Path, **changes: Any) -> None:
    header, body = _header(path)
    meta = json.loads(header["__metadata__"]["vbench_async"])
    meta.update(changes)
    header["__metadata__"]["vbench_async"] = json.dumps(meta)
    _write(path, header, body)


def _wrong_dtype(path: Path) -> None:
    """Same bytes, declared as float32 (a quarter as many values): a reader must not reinterpret them."""
    header, body = _header(path)
    t = header["frames"] if "frames" in header else header["payload"]  # raw or compressed entry
    t["dtype"] = "F32"
    t["shape"] = [len(body) // 4]
    t["data_offsets"] = [0, (len(body) // 4) * 4]
    _write(path, header, body[: (len(body) // 4) * 4])


def _shape_mismatch(path: Path) -> None:
    header, body = _header(path)
    meta = json.loads(header["__metadata__"]["vbench_async"])
    _patch_meta(path, frames_indices=list(meta["frames_indices"]) + [10**6])


def _replace_with_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


@dataclass(frozen=True)
class CacheCase:
    name: str
    damage: Callable[[Path], None]  # applied to an existing, valid entry file


CACHE_CASES: list[CacheCase] = [
    CacheCase("truncated", lambda p: truncate(p, 0.6)),
    CacheCase("truncated_header", lambda p: p.write_bytes(p.read_bytes()[:20])),
    CacheCase("empty_file", lambda p: p.write_bytes(b"")),
    CacheCase("random_bytes", lambda p: p.write_bytes(np.random.default_rng(1).bytes(4096))),
    CacheCase("huge_header_length", lambda p: p.write_bytes((1 << 62).to_bytes(8, "little") + p.read_bytes()[8:])),
    CacheCase("header_not_json", lambda p: p.write_bytes((16).to_bytes(8, "little") + b"{not json}!!!!!!")),
    CacheCase("metadata_shape_mismatch", _shape_mismatch),
    CacheCase("metadata_missing_fields", lambda p: _patch_meta(p, frames_indices=None)),
    CacheCase("wrong_format_version", lambda p: _patch_meta(p, format="vbf0")),
    CacheCase("wrong_dtype", _wrong_dtype),
    CacheCase("extra_trailing_bytes", lambda p: p.write_bytes(p.read_bytes() + b"\0" * 100)),
    CacheCase("entry_is_a_directory", _replace_with_dir),
]


def stale_temp_file(entry: Path) -> Path:
    """What a writer killed mid-write leaves: a partial file under the temporary prefix, next to the entry."""
    tmp = entry.with_name(f".tmp-999999-deadbeef-{entry.name}")
    tmp.write_bytes(entry.read_bytes()[:100] if entry.is_file() else b"partial")
    return tmp


@dataclass
class Corpus:
    """A benchmark folder holding every hostile video and record case, for one `vbench-async run`."""

    root: Path
    data_map: Path
    ids: dict[str, Any] = field(default_factory=dict)  # sample id -> expected kinds
    names: dict[str, str] = field(default_factory=dict)  # sample id -> case name
    cache_videos: dict[str, str] = field(default_factory=dict)  # cache case name -> its (good) video file


def build_corpus(root: Path) -> Corpus:
    """Videos + records: every video case, every record case, and one good video per cache case (whose entry the
    test damages after a preprocessing pass)."""
    videos, scratch = root / "videos", root / "outside"
    paths = build_videos(videos, scratch)
    _video(videos / "good.mp4")
    corpus = Corpus(root=root, data_map=write_data_map(root, "hostile.jsonl"))
    extra = []
    for case in VIDEO_CASES:
        pid = f"vid-{case.name}"
        rec = _good(pid, path=paths[case.name], subject="video")
        if case.window:
            rec["start"], rec["end"] = case.window
        extra.append(rec)
        corpus.ids[pid], corpus.names[pid] = case.expect, case.name
    images = build_images(videos / "images")
    for case in IMAGE_CASES:  # a good video plus a hostile image (VideoMMMU's layout): the image decides the outcome
        pid = f"img-{case.name}"
        extra.append(_good(pid, image_path=f"images/{images[case.name]}", subject="image"))
        corpus.ids[pid], corpus.names[pid] = case.expect, f"image:{case.name}"
    for i, case in enumerate(CACHE_CASES):
        name = f"cache_{i:02d}.mp4"
        _video(videos / name, frames=25 + i)  # distinct content: distinct cache keys
        pid = f"cache-{case.name}"
        extra.append(_good(pid, path=name, subject="cache"))
        corpus.ids[pid], corpus.names[pid] = OK, f"cache:{case.name}"
        corpus.cache_videos[case.name] = name
    for sid, case in write_records(root / "hostile.jsonl", RECORD_CASES, extra).items():
        corpus.ids[sid], corpus.names[sid] = case.expect, f"record:{case.name}"
    return corpus
