"""The benchmark registry: cards and suites from the top-level `benchmarks/` folder and the included folders
(include.py), and the `Benchmark` object the pipeline works with (samples, media paths, frame spec, prompt,
aggregation)."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import yaml

from .. import yaml_bounded
from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..resources import data_dir
from ..sample_result import Result
from ..samples import Sample
from ..settings import from_json
from . import aggregate as _aggregate
from . import prompts
from .card_check import check_card
from .cards import Card, apply_preset, load_card_and_data
from .include import added, include_dirs
from .sources import Resolved, load_records, resolve, to_samples
from .sources import data_root as data_root_of

if TYPE_CHECKING:
    from ..frames.frame_settings import FrameSettings
    from ..frames.spec import FrameSpec
    from ..models import ModelRef
    from .recipes import Recipe


class Benchmark:
    """One benchmark (or one preset of it): everything between a card and the pipeline."""

    def __init__(self, card: Card, prompt_variant: str = prompts.DEFAULT_VARIANT):
        self.id = card.id
        self.card = card
        self._resolved: dict[tuple[str, str], Resolved] = {}
        prompts.check_variant(prompt_variant)
        self.prompt_variant = prompt_variant  # prompts.PROMPT_VARIANTS; a run sets it from --prompt-variant
        self.recipe: Recipe | None = None  # a run's --recipe (`use_recipe`): frames and prompt variant follow it

    def __repr__(self) -> str:
        return f"Benchmark({self.id!r})"

    # -- data ------------------------------------------------------------------------------------------------
    def _key(self, data_root: Path | str | None) -> str:
        return str(data_root)

    def resolve_source(self, data_root: Path | str | None, source: str = "auto") -> Resolved:
        key = (self._key(data_root), source)
        if key not in self._resolved:
            self._resolved[key] = resolve(self.card, data_root, source)
            if source != "auto":  # media of explicitly loaded samples resolve against that source from now on
                self._resolved[(self._key(data_root), "auto")] = self._resolved[key]
        return self._resolved[key]

    def load_samples(self, data_root: Path | str | None, source: str = "auto") -> list[Sample | SampleError]:
        resolved = self.resolve_source(data_root, source)
        return to_samples(load_records(self.card, resolved, data_root), self.card, resolved)

    def record_count(self, data_root: Path | str | None) -> int | None:
        """How many records the benchmark has under this data root, or None when its annotations are absent. A data
        map that cannot be read is an error, as it is for `run`."""
        check_data_root(data_root)
        try:
            return sum(1 for _ in load_records(self.card, self.resolve_source(data_root), data_root))
        except UserError:
            return None

    def video_root(self, data_root: Path | str | None) -> Path:
        return self.resolve_source(data_root).video_root

    def video_path(self, sample: Sample, data_root: Path | str | None, allow_outside: bool = False) -> Path:
        """The sample's video file. Raises SampleError("path_unsafe") for a path that escapes its root."""
        if not sample.video:
            raise SampleError(FailureKind.RECORD_INVALID, f"{sample.key} has no video")
        resolved = self.resolve_source(data_root)
        root = resolved.clip_root if "clip_source" in sample.fields and resolved.clip_root else resolved.video_root
        return safe_join(root, sample.video, allow_outside, "video")

    def video_jobs(self, samples: Iterable[Sample | Exception], specs: Iterable[Any], data_root: Path | str | None,
                   allow_outside: bool = False) -> tuple[list[Any], list[str]]:
        """The frame jobs of `samples`' videos, one per spec (`frames.VideoJob`), and a line for each sample left out:
        an invalid record or one without a video (nothing to decode; the run records it), or an unsafe path."""
        from ..frames import VideoJob

        specs = list(specs)
        jobs, skipped = [], []
        for sample in samples:
            if isinstance(sample, Exception) or not sample.video:
                skipped.append("")  # nothing to say: the run records these samples itself
                continue
            try:
                video = self.video_path(sample, data_root, allow_outside=allow_outside)
            except SampleError as exc:
                skipped.append(f"{sample.key}: {exc}")
                continue
            jobs.extend(VideoJob(video, spec, sample.window, benchmark=self.id) for spec in specs)
        return jobs, skipped

    def image_paths(self, sample: Sample, data_root: Path | str | None, allow_outside: bool = False) -> list[Path]:
        """The sample's extra images, checked like its video (SampleError("path_unsafe") unless allowed)."""
        root = self.resolve_source(data_root).image_root
        return [safe_join(root, image, allow_outside, "image") for image in sample.images]

    # -- model inputs ----------------------------------------------------------------------------------------
    def frame_spec(self, model: ModelRef, overrides: FrameSettings | Mapping[str, Any] | None = None) -> FrameSpec:
        """This benchmark's frames for `model` (`frames.spec.resolve_frame_spec`: the card's settings, preset
        included, then the checkpoint's, then `overrides`, the user's flags; unset values are ignored)."""
        from ..frames.spec import resolve_frame_spec

        card = self.recipe.frames(self.id, self.card.frames) if self.recipe is not None else self.card.frames
        return resolve_frame_spec(model.family, card, dict(model.frame_settings), overrides, self.id)

    def use_recipe(self, recipe: Recipe | None, prompt_variant: str | None) -> None:
        """Evaluate under `recipe` (None: the cards as they are) with the user's `prompt_variant` (--prompt-variant;
        None: not given): the recipe's frames go over the card's, its prompt variant holds unless the user chose one."""
        self.recipe = recipe
        self.prompt_variant = recipe.prompt_variant(self.id, prompt_variant) if recipe else \
            prompt_variant or prompts.DEFAULT_VARIANT

    def template_for(self, sample: Sample, thinking: bool = False) -> str:
        """The template file this sample renders with under the benchmark's prompt variant."""
        from ..scoring.task_types import canonical_or_given

        routed = self.card.template_for(sample.task_type, canonical_or_given(sample.task_type))
        return prompts.resolve(routed, self.id, self.prompt_variant, thinking)

    def render_prompt(self, sample: Sample, thinking: bool = False) -> str:
        return prompts.render(self.template_for(sample, thinking), sample, thinking)

    def prompt_renderer(self, thinking: bool = False) -> Callable[[Sample], str]:
        """`render_prompt` for the many samples of one plan or run: the template of each task type is routed and
        loaded once, with the prompt variant the benchmark has now (a plan of 100,000 questions renders them all)."""
        routes: dict[str, str] = {}
        loaded: dict[str, Any] = {}

        def render(sample: Sample) -> str:
            name = routes.get(sample.task_type)
            if name is None:  # an unroutable task type raises here, for each of its samples
                name = routes[sample.task_type] = self.template_for(sample, thinking)
            return prompts.render(name, sample, thinking, loaded)

        return render

    def prompt_templates(self) -> list[str]:
        """Every template file the benchmark can render with under its prompt variant."""
        return prompts.variant_templates(dict(self.card.prompt), self.id, self.prompt_variant)

    def prompt_template_hash(self) -> str:
        return prompts.template_hash(dict(self.card.prompt), self.id, self.prompt_variant)

    # -- scoring ---------------------------------------------------------------------------------------------
    @property
    def protocol(self) -> str | None:
        """The official protocol: the run's recipe's for this benchmark where it names one (the maker's answer
        extraction), else the card's (None for the demo cards)."""
        own = self.recipe.protocol(self.id) if self.recipe is not None else None
        return own or (self.card.official.protocol if self.card.official else None)

    def score(self, sample: Sample, output: str) -> Any:
        """`scoring.score` with this benchmark's official protocol: Score.official and Score.robust both filled."""
        from ..scoring import score

        return score(sample, output, protocol=self.protocol)

    # -- results ---------------------------------------------------------------------------------------------
    def aggregate(self, results: Iterable[Result | Mapping[str, Any]]) -> dict[str, Any]:
        return _aggregate.aggregate(results, self.card.aggregation, self.card.categories, self.card.metric)


def safe_join(root: Path, relative: str, allow_outside: bool, what: str) -> Path:
    """`root / relative`, refusing absolute paths, "..", and symlinks that lead out of `root` unless allowed."""
    path = Path(relative)
    if path.is_absolute():
        if allow_outside:
            return path
        raise SampleError(FailureKind.PATH_UNSAFE,
                          f"{what} path {relative!r} is absolute; paths must be relative to {root} "
                          "(allow paths outside the data root to accept it)")
    candidate = root.absolute() / path
    if allow_outside:
        return candidate
    if ".." in path.parts:
        raise SampleError(FailureKind.PATH_UNSAFE, f"{what} path {relative!r} climbs out of {root} with '..'")
    try:
        real_root, real = root.resolve(), candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13), a broken mount
        raise SampleError(FailureKind.PATH_UNSAFE, f"{what} path {relative!r} cannot be resolved: {exc}") from None
    if not real.is_relative_to(real_root):
        raise SampleError(FailureKind.PATH_UNSAFE,
                          f"{what} path {relative!r} resolves outside {root} (a symlink?); "
                          "allow paths outside the data root to accept it")
    return candidate


# ----------------------------------------------------------------------------------------------- registry


@cache
def _card_files(folder: Path, checked: bool = False) -> dict[str, tuple[Card, dict]]:
    """The cards of one folder; `checked`: also held to `check_card` (an included folder, read once per process)."""
    cards: dict[str, tuple[Card, dict]] = {}
    for path in sorted(folder.glob("*.yaml")):
        card, data = load_card_and_data(path)
        if card.id in cards:
            raise UserError(f"{path}: id {card.id!r} is already used by {cards[card.id][0].file}")
        if checked:
            check_card(card)
        cards[card.id] = (card, data)
    return cards


def _cards() -> dict[str, tuple[Card, dict]]:
    cards = _card_files(data_dir("benchmarks"))
    for folder in include_dirs():
        extra = _card_files(folder, checked=True)
        _refuse_clashes("benchmark", {k: v[0].file for k, v in cards.items()}, {k: v[0].file for k, v in extra.items()})
        cards = {**cards, **extra}
    return cards


def _refuse_clashes(what: str, known: Mapping[str, Path | None], extra: Mapping[str, Path | None]) -> None:
    """An included id that is already taken is an error naming both files: never a silent override."""
    for name in sorted(set(known) & set(extra)):
        raise UserError(f"{extra[name]}: {what} id {name!r} is already used by {known[name]}; give it another id")


def list_benchmarks() -> list[str]:
    """Card ids, sorted (presets are not listed; see each card's `presets`)."""
    return sorted(_cards())


def check_data_root(path: Path | str | None) -> None:
    """UserError unless `--data-root` can be read: a folder, or a data map whose keys are all benchmark ids."""
    root = data_root_of(path)
    known = list_benchmarks()
    unknown = sorted(k for k in root.overrides if k.partition("@")[0] not in known)
    if unknown:
        raise UserError(f"{path}: unknown benchmark {unknown[0]!r}{did_you_mean(unknown[0], known)} under "
                        "'benchmarks' (a data map's keys are benchmark ids, see `vbench-async list`)")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'videomme'?)" for a near miss, else ""."""
    close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=1, cutoff=0.6)
    match = next((k for k in known if close and k.lower() == close[0]), None)
    return f" (did you mean {match!r}?)" if match else ""


def get_benchmark(name: str) -> Benchmark:
    """A benchmark by id, or `<id>@<preset>` for a preset."""
    base, _, preset = name.strip().partition("@")
    cards = _cards()
    if base not in cards:
        raise UserError(f"unknown benchmark {base!r}{did_you_mean(base, cards)}; known benchmarks: "
                        f"{', '.join(sorted(cards))}")
    card, raw = cards[base]
    return Benchmark(apply_preset(card, preset, raw) if preset else card)


def recorded_benchmark(name: str, recipe: str | None, version: int | None = None) -> Benchmark:
    """The benchmark as a run evaluated it, under the recipe (`recipe`, `version`) its result config records (None:
    the cards): what re-scoring its result lines uses, so that they are read with the protocol of the recipe they ran
    under. A recipe this version does not hold (an unknown name, another version) is refused: its answer extraction
    may not be this one's."""
    from . import recipes

    bench = get_benchmark(name)
    if recipe is not None:
        known = recipes.RECIPES.get(recipe)
        if known is None or known.version != version:
            have = f"{known.name} v{known.version}" if known else "no such recipe"
            raise UserError(f"{name}: its results were made under the recipe {recipe} v{version}, which this version "
                            f"does not hold ({have}); re-score them with the version that made them")
        bench.use_recipe(known, None)  # its prompt variant is the recipe's: a --prompt-variant is not in the config
    return bench


def score_sample(sample: Sample, output: str, recipe: str | None = None) -> Any:
    """Score a sample with the official protocol of the benchmark it belongs to (`sample.benchmark`, a card id or
    `<id>@<preset>`) under the run's `recipe` (a name; None: the cards'); the pipeline's scorer for runs that span
    several benchmarks."""
    from ..scoring import score

    return score(sample, output, protocol=_protocol_of(sample.benchmark, added(), recipe))


def run_scorer(recipe: str | None) -> Callable[[Sample, str], Any]:
    """`score_sample` for the samples of a run under `recipe` (its `RunConfig.recipe`)."""
    return functools.partial(score_sample, recipe=recipe)


@cache
def _protocol_of(benchmark: str, folders: tuple[Path, ...] = (), recipe: str | None = None) -> str | None:
    """`folders`: the included folders when asked (a server job's card of the same id may be another's)."""
    from . import recipes

    bench = get_benchmark(benchmark)
    bench.use_recipe(recipes.get(recipe) if recipe else None, None)
    return bench.protocol


def suite_files() -> dict[str, Path]:
    """Suite name -> file: the built-in suites, then those of the included folders (`DIR/suites/*.yaml`)."""
    files = _suite_folder(data_dir("benchmarks") / "suites")
    for folder in include_dirs():
        extra = _suite_folder(folder / "suites")
        _refuse_clashes("suite", files, extra)
        files = {**files, **extra}
    return files


def _suite_folder(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def list_suites() -> list[str]:
    return sorted(suite_files())


def load_suite(path: Path) -> tuple[str, list[str]]:
    """(description, benchmark names) of a suite file: `{description: ..., benchmarks: [id, id@preset, ...]}`."""
    try:
        data = yaml_bounded.load(path.read_text(encoding="utf-8"))  # no alias, bounded depth
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read suite {path}: {exc}") from exc
    if isinstance(data, list):  # a bare list of names is a suite too
        data = {"benchmarks": data}
    if not isinstance(data, Mapping) or "benchmarks" not in data:
        raise UserError(f"{path}: a suite is a mapping with 'benchmarks' (and optional id, name, description)")
    suite = from_json(SuiteFile, data, str(path))
    return suite.description, list(suite.benchmarks)


@dataclass(frozen=True)
class SuiteFile:
    """A suite's YAML: the benchmarks it runs (ids, `id@preset`), in order."""

    benchmarks: tuple[str, ...]
    description: str = ""
    id: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if not self.benchmarks or not all(self.benchmarks):
            raise ValueError("'benchmarks' must be a non-empty list of benchmark ids")


def _suite_path(suite: str) -> Path:
    files = suite_files()
    if suite in files:
        return files[suite]
    path = Path(suite).expanduser()
    if path.is_file():
        return path
    raise UserError(f"unknown suite {suite!r}{did_you_mean(suite, files)}; built-in suites: "
                    f"{', '.join(files) or 'none'} "
                    "(or give the path of a suite YAML file)")


def resolve_benchmarks(suite: str | None, names: list[str] | None) -> list[Benchmark]:
    """Benchmarks of a suite (built-in name or YAML path) followed by any named ones, without repeats."""
    if not suite and not names:
        raise UserError("choose benchmarks: a suite (" + ", ".join(list_suites()) + ") or benchmark names")
    wanted = list(load_suite(_suite_path(suite))[1]) if suite else []
    wanted += [n for name in names or [] for n in name.split(",") if n.strip()]
    out: list[Benchmark] = []
    for name in wanted:
        bench = get_benchmark(name)
        if all(b.id != bench.id for b in out):
            out.append(bench)
    return out
