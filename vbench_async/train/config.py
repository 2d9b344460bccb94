"""`TrainConfig`: every knob of a training run, read from one YAML file (plus `--set key=value` overrides).

Parsing is strict: an unknown key or a wrongly typed value is a `UserError` naming the key, so a typo never silently
trains with a default. Algorithm presets (grpo, dr_grpo, dapo, gspo, rloo) fill the algorithm fields left unset;
docs/training.md gives the formula behind each field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from .. import yaml_bounded
from ..errors import UserError
from ..frames.ablation import ABLATIONS
from ..frames.preprocess import WORKERS as DECODE_WORKERS
from .resume_identity import digest, identity

if TYPE_CHECKING:
    from ..backends.vllm import VLLMSettings
    from ..runner import RunConfig


@dataclass
class DataConfig:
    benchmark: str | None = None  # a benchmark card id (its adapters, prompts and media paths), or ...
    records: str | None = None  # ... a unified-format JSON/JSONL file of training records
    data_root: str | None = None  # --data-root of the card (folder or data-map YAML)
    video_dir: str | None = None  # records mode: where `path` and `image_path` are relative to (default: file's dir)
    prompt_template: str | Mapping[str, str] | None = None  # records mode: template name, or task type -> name
    frames: dict[str, Any] = field(default_factory=dict)  # FrameSpec fields: fps, max_frames, max_pixels, image_*
    frame_source: str = "cache"  # cache: frame cache (filled before step 1); decode: decode every time (baseline)
    cache_dir: str | None = None  # frame cache folder (default: $VBENCH_ASYNC_CACHE or ~/.cache/vbench-async/frames)
    decode_workers: int = DECODE_WORKERS  # processes that fill the cache before training (`run`'s default too)
    cache_scope: str = "shared"  # shared: one cache all nodes see (ranks split the videos); node: a node-local
    # cache per machine (each node's ranks split all the videos among themselves, so every node has every video)
    shuffle: bool = True
    max_samples: int | None = None
    offline_field: str = "offline_response"  # record field holding offline response(s) (str or list of str)
    ablation: str | None = None  # an input ablation of frames/ablation.py applied to every video after the cache, as
    # `run --ablation` does (e.g. blank: the policy trains on black frames, the control of a learning test); null: off


class RolloutEngine(enum.Enum):
    """The rollout engine kinds `rollout.engine` names (besides auto); the trainer builds the one `kind` gives."""

    HF = "hf"  # transformers' generate on the gathered weights
    VLLM = "vllm"  # a colocated vLLM engine (GPU)


AUTO_ENGINE = {True: RolloutEngine.VLLM, False: RolloutEngine.HF}  # rollout.engine auto: by whether a GPU is used


@dataclass
class RolloutConfig:
    engine: str = "auto"  # a RolloutEngine's value, or auto: vllm on GPU, hf otherwise
    n: int = 8  # samples per prompt (the group)
    temperature: float = 1.0  # must be > 0: rollouts sample, and log-probs are taken at this temperature
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    offline_per_group: int = 0  # group members replaced by the record's offline responses
    offline_accuracy_threshold: float | None = None  # only replace when the group's mean accuracy is below this
    max_model_len: int = 8192  # the engine's window; prompts longer than max_model_len - max_tokens are skipped
    vllm_gpu_memory_utilization: float = 0.3
    vllm_sleep_level: int | None = 2  # between rollouts (GPU): 2 drops the weights too (they are re-synced anyway),
    # 1 keeps them in CPU memory, null never sleeps
    tensor_parallel_size: int = 1  # vLLM TP: each run of this many consecutive ranks (inside one node) shares one
    # engine sharded over their GPUs (TRL's vllm_tensor_parallel_size); they roll out their prompts together
    max_num_seqs: int | None = None  # vLLM; null: every sequence of one engine call at once (prompts x n)
    max_num_batched_tokens: int | None = None  # vLLM; null: max(8192, max_model_len), so any admitted prompt's
    # video fits the encoder cache whole and a prompt prefills in one chunk
    sync_bucket_mb: int = 512  # weight sync: shards are cast to the engine's dtype and gathered in all-gathers of
    # at most this many MiB each (a larger tensor goes alone), instead of one collective per tensor

    def kind(self, gpu: bool) -> RolloutEngine:
        """The engine `engine` names; auto: vllm on a GPU, hf otherwise."""
        return AUTO_ENGINE[gpu] if self.engine == "auto" else RolloutEngine(self.engine)


@dataclass
class AlgorithmConfig:
    name: str = "grpo"  # grpo | dr_grpo | dapo | gspo | rloo: presets for the fields left as null
    advantage: str | None = None  # grpo (mean/std per group) | mean (Dr. GRPO) | rloo (leave-one-out)
    loss_agg: str | None = None  # token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm
    ratio: str | None = None  # token (PPO) | sequence (GSPO)
    clip_low: float | None = None
    clip_high: float | None = None
    clip_ratio_c: float | None = None  # dual clip for negative advantages (e.g. 3.0); null = off
    dynamic_sampling: bool | None = None  # DAPO: drop groups whose rewards are all equal, refill from the data
    max_sampling_tries: int = 4  # extra rollout rounds to refill dropped groups
    kl: str = "none"  # none | k1 | k3 (low-variance): penalty against the initial policy, added to the loss
    kl_coef: float = 0.0
    std_eps: float = 1e-6
    overlong_buffer: int | None = None  # DAPO overlong shaping: tokens before rollout.max_tokens where the reward
    # falls linearly by up to overlong_penalty (null: the preset's; dapo: max_tokens / 5; 0: off)
    overlong_penalty: float = 1.0
    mask_truncated: bool = False  # DAPO's overlong filtering: responses cut at max_tokens get no gradient
    # Rollout/training mismatch: weight each token's loss by min(pi_train / pi_rollout, cap) where the engine
    # reports its sampling log-probs (vLLM); none: off. TRL corrects this way by default.
    rollout_is: str = "token_truncate"  # token_truncate | none
    rollout_is_cap: float = 2.0


@dataclass
class RewardConfig:
    format_weight: float = 0.1
    format_mode: str = "answer_tag"  # answer_tag | well_formed | none (scoring.format_score)


@dataclass
class TrainLoopConfig:
    steps: int = 100
    prompts_per_step: int = 8  # global, over all ranks; a multiple of the world size
    micro_batch_size: int = 8  # sequences per forward/backward ...
    max_tokens_per_micro_batch: int | None = None  # ... or a token budget (prompt + response, padded) instead
    balance_ranks: bool = True  # swap groups between ranks so each runs about as many tokens (verl: balance_batch)
    logprob_chunk: int = 512  # response positions per log-softmax chunk (the full-vocab fp32 tensor never exists)
    attn_implementation: str = "auto"  # auto: flash_attention_2 on CUDA when flash-attn is installed, else sdpa
    packing: bool | None = None  # padding-free micro-batches; null: where attention is varlen (flash), else padded
    mini_batches: int | None = None  # optimizer steps per rollout batch (>1 moves the PPO ratio off 1); null: 1,
    # or 4 for gspo
    ppo_epochs: int = 1
    lr: float = 1e-6
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    dtype: str = "auto"  # auto: bf16 mixed precision on GPU, fp32 on CPU; or float32 / bfloat16
    freeze_vision: bool = False


@dataclass
class FSDPConfig:
    shard: str = "layer"  # layer: one FSDP2 unit per decoder layer and vision block; root: one unit
    # Ranks each parameter is sharded over (verl's fsdp_size); the world splits into world / shard_size replicas
    # (HSDP: a 2-D mesh, replicate x shard), so per-micro-batch collectives and the weight sync stay inside a
    # replica. null: the ranks of one node (LOCAL_WORLD_SIZE) when the run spans several nodes with several ranks
    # each, else every rank (plain FSDP). 1 = pure data parallel (every rank holds the whole model).
    shard_size: int | None = None
    backend: str = "auto"  # gloo on CPU, nccl on GPU
    timeout_s: float = 1800.0  # collectives that wait longer fail instead of hanging
    peer_timeout_s: float = 45.0  # a rank that shows no sign of life for this long ends the run on every rank
    offload_rollout: bool = False  # parameter shards and Adam state in host memory while the rollout engine runs
    # (more GPU memory for its KV cache; a copy each way per rollout: train/offload.py)


@dataclass
class CheckpointConfig:
    every: int = 0  # steps between checkpoints (0: only at the end)
    keep: int = 2  # newest checkpoints kept
    resume: str = "auto"  # auto: latest in output_dir, none, or a checkpoint directory
    export: bool = True  # write a Hugging Face model directory at the end (output_dir/export)


# RunConfig fields the trainer sets itself: the model is the policy, the engine is each rank's rollout engine (its
# settings are `rollout.*`), the run directory is OUTPUT/validation/step-N, the shard is the rank; a run's judge
# pass is the CLI's, which training does not run.
VALIDATION_OWNED = ("model", "backend", "engine", "server", "shard", "output_dir", "judge_model")


@dataclass
class ValidationConfig:
    every: int = 0  # steps between evaluations of the held-out set (0: never)
    # The evaluation's settings, in RunConfig's JSON form (`RunConfig.to_json`: the `vbench-async run` flags, nested
    # as selection.*, sampling.*, frame_overrides.*, prompt.*): e.g. {selection: {benchmarks: [mvbench]},
    # sampling: {max_tokens: 64}}. The fields of VALIDATION_OWNED are the trainer's; cache_dir defaults to
    # data.cache_dir (the training's frame cache) and progress to false.
    run: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 1800.0  # how long a rank that finished its share waits for the others' (then: no scores)

    def run_config(self, model: str, output_dir: Path, backend: str, shard: tuple[int, int] | None,
                   cache_dir: str | None = None, engine: VLLMSettings | None = None) -> RunConfig:
        """The `runner.RunConfig` of one validation: `run` read with the flags' checks, plus the trainer's fields."""
        from ..runner import RunConfig

        defaults: dict[str, Any] = {"progress": False}
        if cache_dir is not None:
            defaults["cache_dir"] = cache_dir
        base = RunConfig.from_json({**defaults, **self.run, "model": model}, exclude=VALIDATION_OWNED[1:])
        owned: dict[str, Any] = {"output_dir": Path(output_dir), "backend": backend, "shard": shard}
        if engine is not None:
            owned["engine"] = engine
        return dataclasses.replace(base, **owned)


@dataclass
class LoggingConfig:
    tensorboard: bool = False
    wandb_project: str | None = None
    progress: bool = True
    log_samples: int = 2  # completions per step printed to samples.jsonl


@dataclass
class TrainConfig:
    model: str = "tiny-qwen2.5-vl"
    output_dir: str = "runs/train"
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    fsdp: FSDPConfig = field(default_factory=FSDPConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def to_dict(self) -> dict[str, Any]:
        d = json.loads(json.dumps(dataclasses.asdict(self)))
        if d["data"]["ablation"] is None:  # present only when set: a real run's hash and saved config stay as they were
            del d["data"]["ablation"]
        return d

    def hash(self) -> str:
        """Identity of what is trained (the mathematics of the update and the data order; not the cadence, the layout
        or the runtime knobs): a resume must match it."""
        return digest(identity(self.to_dict()))

    def legacy_hash(self) -> str:
        """The hash checkpoints saved before trainer_state.json held the config carry: RUNTIME_KNOBS included."""
        return digest(identity(self.to_dict(), runtime=True))


# ------------------------------------------------------------------------------------------------ presets

# The defining settings of each algorithm (docs/training.md); explicit config values win.
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": dict(advantage="grpo", loss_agg="seq-mean-token-mean", ratio="token", clip_low=0.2, clip_high=0.2,
                 dynamic_sampling=False),
    "dr_grpo": dict(advantage="mean", loss_agg="seq-mean-token-sum-norm", ratio="token", clip_low=0.2,
                    clip_high=0.2, dynamic_sampling=False),
    "dapo": dict(advantage="grpo", loss_agg="token-mean", ratio="token", clip_low=0.2, clip_high=0.28,
                 dynamic_sampling=True),
    "gspo": dict(advantage="grpo", loss_agg="seq-mean-token-mean", ratio="sequence", clip_low=3e-4, clip_high=4e-4,
                 dynamic_sampling=False),
    "rloo": dict(advantage="rloo", loss_agg="token-mean", ratio="token", clip_low=0.2, clip_high=0.2,
                 dynamic_sampling=False),
}
ADVANTAGES = ("grpo", "mean", "rloo")
LOSS_AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
RATIOS = ("token", "sequence")
KL_KINDS = ("none", "k1", "k3")
CHOICES: dict[str, tuple[str, ...]] = {
    "data.frame_source": ("cache", "decode"),
    "data.cache_scope": ("shared", "node"),
    "data.ablation": tuple(ABLATIONS),
    "rollout.engine": ("auto", *(e.value for e in RolloutEngine)),
    "algorithm.name": tuple(PRESETS),
    "algorithm.advantage": ADVANTAGES,
    "algorithm.loss_agg": LOSS_AGGS,
    "algorithm.ratio": RATIOS,
    "algorithm.kl": KL_KINDS,
    "algorithm.rollout_is": ("token_truncate", "none"),
    "reward.format_mode": ("answer_tag", "well_formed", "none"),
    "train.dtype": ("auto", "float32", "bfloat16"),
    "train.attn_implementation": ("auto", "sdpa", "eager", "flash_attention_2", "flash_attention_3"),
    "fsdp.shard": ("layer", "root"),
    "fsdp.backend": ("auto", "gloo", "nccl"),
}


def resolve_presets(cfg: TrainConfig) -> TrainConfig:
    """Fill unset algorithm fields from the chosen preset (in place; returns cfg)."""
    for key, value in PRESETS[cfg.algorithm.name].items():
        if getattr(cfg.algorithm, key) is None:
            setattr(cfg.algorithm, key, value)
    a, t = cfg.algorithm, cfg.train
    if a.overlong_buffer is None:  # DAPO's paper: a 4,096-token buffer before its 20,480-token limit
        a.overlong_buffer = cfg.rollout.max_tokens // 5 if a.name == "dapo" else 0
    if t.mini_batches is None:
        # GSPO: with one optimizer step per rollout every ratio is exactly 1 and its sequence clipping never acts.
        wanted = GSPO_MINI_BATCHES if a.name == "gspo" and t.ppo_epochs == 1 else 1
        t.mini_batches = max(d for d in range(1, wanted + 1) if t.prompts_per_step % d == 0)
    return cfg


GSPO_MINI_BATCHES = 4  # the gspo preset's optimizer steps per rollout batch (the largest divisor of the batch)


# ------------------------------------------------------------------------------------------------ parsing


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config, apply `key.sub=value` overrides (values parsed as YAML), check, resolve presets."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            loaded = yaml_bounded.load(path.read_text(encoding="utf-8"))  # no alias, bounded depth
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"cannot read training config {path}: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise UserError(f"{path}: a training config is a YAML mapping")
        data = loaded or {}
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"override {item!r} is not KEY=VALUE (e.g. rollout.n=4)")
        try:
            value = yaml_bounded.load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise UserError(f"override {item!r}: not valid YAML: {exc}") from exc
        _set_path(data, key.strip().split("."), value)
    cfg = build(TrainConfig, data, "")
    check_config(cfg)
    return resolve_presets(cfg)


def _set_path(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        nxt = data.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise UserError(f"override {'.'.join(keys)}: {k} is not a section")
        data = nxt
    data[keys[-1]] = value


def build(cls: type, data: Any, where: str) -> Any:
    """A dataclass from a mapping, recursively, rejecting unknown keys and values of the wrong type."""
    if not isinstance(data, Mapping):
        raise UserError(f"{where or 'config'} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(_join(where, k) for k in unknown)}; "
                        f"known here: {', '.join(sorted(names))}")
    values = {}
    for name, value in data.items():
        values[name] = _coerce(hints[name], value, _join(where, name))
    return cls(**values)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _coerce(hint: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return build(hint, value if value is not None else {}, where)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(arg, value, where)
            except UserError as exc:
                errors.append(str(exc))
        raise UserError(errors[0] if len(errors) == 1 else f"{where}: {value!r} has the wrong type")
    if hint is Any:
        return value
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise UserError(f"{where} must be a mapping, got {value!r}")
        return dict(value)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{where} must be a list, got {value!r}")
        inner = args[0] if args else Any
        items = [_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-6" (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{where} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise UserError(f"{where} must be a string, got {value!r}")
        return value
    return value


def check_config(cfg: TrainConfig) -> None:
    """Cross-field checks with messages that say what to change."""
    for dotted, allowed in CHOICES.items():
        section, key = dotted.split(".")
        value = getattr(getattr(cfg, section), key)
        if value is not None and value not in allowed:
            raise UserError(f"{dotted} is {value!r}; choose from {', '.join(allowed)}")
    d, r, t, a = cfg.data, cfg.rollout, cfg.train, cfg.algorithm
    if bool(d.benchmark) == bool(d.records):
        raise UserError("set exactly one of data.benchmark (a card id) and data.records (a unified JSON/JSONL file)")
    positive = {"rollout.n": r.n, "rollout.max_tokens": r.max_tokens, "train.steps": t.steps,
                "train.prompts_per_step": t.prompts_per_step, "train.micro_batch_size": t.micro_batch_size,
                "train.mini_batches": 1 if t.mini_batches is None else t.mini_batches, "train.ppo_epochs": t.ppo_epochs}
    for name, value in positive.items():
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    if not r.temperature > 0:
        raise UserError(f"rollout.temperature must be > 0, got {r.temperature}: rollouts sample (greedy decoding "
                        "gives every sample of a group the same text) and log-probs are taken at this temperature; "
                        "use e.g. 1.0")
    if r.max_tokens >= r.max_model_len:
        raise UserError(f"rollout.max_tokens ({r.max_tokens}) must be below rollout.max_model_len "
                        f"({r.max_model_len}): no room is left for the prompt")
    if a.overlong_buffer is not None and not 0 <= a.overlong_buffer < r.max_tokens:
        raise UserError(f"algorithm.overlong_buffer must be in [0, rollout.max_tokens), got {a.overlong_buffer}")
    if t.max_tokens_per_micro_batch is not None and t.max_tokens_per_micro_batch < 1:
        raise UserError("train.max_tokens_per_micro_batch must be at least 1 (or null)")
    if t.logprob_chunk < 1:
        raise UserError("train.logprob_chunk must be at least 1")
    if cfg.fsdp.shard_size is not None and cfg.fsdp.shard_size < 1:
        raise UserError(f"fsdp.shard_size must be at least 1 (or null), got {cfg.fsdp.shard_size}")
    if r.tensor_parallel_size < 1 or (r.max_num_seqs is not None and r.max_num_seqs < 1) or \
            (r.max_num_batched_tokens is not None and r.max_num_batched_tokens < 1):
        raise UserError("rollout.tensor_parallel_size, max_num_seqs and max_num_batched_tokens must be at least 1")
    if r.tensor_parallel_size > 1 and r.kind(gpu=True) is RolloutEngine.HF:  # hf named, not auto
        raise UserError("rollout.tensor_parallel_size > 1 needs the vllm engine (rollout.engine: vllm or auto on GPU)")
    if r.sync_bucket_mb < 1:
        raise UserError(f"rollout.sync_bucket_mb must be at least 1, got {r.sync_bucket_mb}")
    if cfg.fsdp.peer_timeout_s <= 0 or cfg.validation.timeout_s <= 0:
        raise UserError("fsdp.peer_timeout_s and validation.timeout_s must be positive")
    if r.vllm_sleep_level not in (None, 1, 2):
        raise UserError(f"rollout.vllm_sleep_level must be 1, 2 or null, got {r.vllm_sleep_level}")
    if r.n < 2:
        raise UserError("rollout.n must be at least 2: group-relative advantages need several samples per prompt")
    if not 0 <= r.offline_per_group < r.n:
        raise UserError(f"rollout.offline_per_group must be in [0, rollout.n), got {r.offline_per_group}")
    if t.lr <= 0:
        raise UserError(f"train.lr must be positive, got {t.lr}")
    if a.kl != "none" and a.kl_coef <= 0:
        raise UserError(f"algorithm.kl is {a.kl!r} but algorithm.kl_coef is {a.kl_coef}; set a positive kl_coef "
                        "or kl: none")
    check_validation(cfg.validation)
    if t.mini_batches and t.prompts_per_step % t.mini_batches:
        raise UserError(f"train.prompts_per_step ({t.prompts_per_step}) must be a multiple of train.mini_batches "
                        f"({t.mini_batches})")


def check_validation(v: ValidationConfig) -> None:
    """`validation.run` is checked as a server job is (unknown fields, bounds, the trainer's own fields refused by
    name), when the config is read: a typo must not wait for the first validation to show."""
    from ..runner import RunConfig

    if v.every < 0:
        raise UserError(f"validation.every must be at least 0, got {v.every}")
    owned = sorted(set(v.run) & set(VALIDATION_OWNED))
    if owned:
        raise UserError(f"validation.run: {', '.join(owned)} cannot be set here: the trainer sets them (the model "
                        "is the policy, the engine is each rank's rollout engine, the run directory is "
                        "OUTPUT/validation/step-N)")
    try:
        run = RunConfig.from_json({"model": "-", **v.run})
    except UserError as exc:
        raise UserError(f"validation.run: {exc}") from None
    if v.every and run.selection.empty:
        raise UserError("validation.every is set: name validation.run.selection.benchmarks or "
                        "validation.run.selection.suite")
