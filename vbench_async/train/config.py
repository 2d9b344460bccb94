"""`TrainConfig`: every knob of a training run, read from one YAML file (plus `--set key=value` overrides, or the
`--section.key VALUE` flags `train/flags.py` generates from the same fields).

Declared the TRL way: each field's metadata is its help, its bounds (`min`, `max`, `above`) and its `choices`, and
`settings.from_json` reads the YAML with them, as it reads `RunConfig`: an unknown key (with a did-you-mean), a
wrongly typed or out-of-bounds value is a `UserError` naming the key, so a typo never silently trains with a
default. `check_config` keeps only the checks that relate two fields. Algorithm presets (grpo, dr_grpo, dapo, gspo,
rloo) fill the algorithm fields left unset; docs/training.md gives the formula behind each field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from .. import settings, yaml_bounded
from ..errors import UserError
from ..frames.ablation import ABLATIONS
from ..frames.frame_settings import FrameSettings
from ..frames.preprocess import WORKERS as DECODE_WORKERS
from ..scoring.router import FORMAT_MODES
from .resume_identity import digest, identity

if TYPE_CHECKING:
    from ..backends.vllm import VLLMSettings
    from ..evaluation.runner import RunConfig


def knob(default: Any, help: str, **meta: Any) -> Any:
    """A declared field: its default, its `help` and its checks (`min`, `max`, `above`, `choices`: settings.py)."""
    if isinstance(default, (dict, list)):  # a mutable default: each config its own copy
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


def section(cls: type, help: str) -> Any:
    """A nested settings section (its own fields are the knobs)."""
    return field(default_factory=cls, metadata={"help": help})


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
GSPO_MINI_BATCHES = 4  # the gspo preset's optimizer steps per rollout batch (the largest divisor of the batch)


@dataclass
class DataConfig:
    benchmark: str | None = knob(None, "a benchmark card id (its adapters, prompts and media paths), or ...")
    records: str | None = knob(None, "... a unified-format JSON/JSONL file of training records")
    data_root: str | None = knob(None, "--data-root of the card (folder or data-map YAML)")
    video_dir: str | None = knob(None, "records mode: where `path` and `image_path` are relative to (null: the "
                                       "file's folder)")
    prompt_template: str | Mapping[str, str] | None = knob(None, "records mode: a template name, or task type -> name")
    frames: FrameSettings = section(FrameSettings, "the frames a rollout sees: the `run` frame flags' settings "
                                    "(frames/frame_settings.py), over the benchmark card's in benchmark mode")
    frame_source: str = knob("cache", "cache: the frame cache (filled before step 1); decode: decode every time "
                                      "(baseline)", choices=("cache", "decode"))
    cache_dir: str | None = knob(None, "frame cache folder (null: $VBENCH_ASYNC_CACHE, else $VBENCH_ASYNC_HOME/frames, "
                                       "else ~/.cache/vbench-async/frames)")
    decode_workers: int = knob(DECODE_WORKERS, "processes that fill the cache before training (`run`'s default too)")
    cache_scope: str = knob("shared", "shared: one cache all nodes see (ranks split the videos); node: a node-local "
                                      "cache per machine (each node's ranks split all the videos among themselves, so "
                                      "every node has every video)", choices=("shared", "node"))
    shuffle: bool = knob(True, "visit the records in a new seeded order every epoch (false: file order)")
    max_samples: int | None = knob(None, "train on the first this many records only (null: all)")
    offline_field: str = knob("offline_response", "record field holding offline response(s) (a string or a list)")
    ablation: str | None = knob(None, "an input ablation of frames/ablation.py applied to every video after the "
                                      "cache, as `run --ablation` does (e.g. blank: the policy trains on black "
                                      "frames, the control of a learning test); null: off", choices=tuple(ABLATIONS))


class RolloutEngine(enum.Enum):
    """The rollout engine kinds `rollout.engine` names (besides auto); the trainer builds the one `kind` gives."""

    HF = "hf"  # transformers' generate on the gathered weights
    VLLM = "vllm"  # a colocated vLLM engine (GPU)


AUTO_ENGINE = {True: RolloutEngine.VLLM, False: RolloutEngine.HF}  # rollout.engine auto: by whether a GPU is used


@dataclass
class RolloutConfig:
    engine: str = knob("auto", "the rollout engine; auto: vllm on GPU, hf otherwise",
                       choices=("auto", *(e.value for e in RolloutEngine)))
    n: int = knob(8, "samples per prompt (the group): group-relative advantages need several", min=2)
    temperature: float = knob(1.0, "sampling temperature: rollouts sample (greedy decoding gives every sample of a "
                                   "group the same text) and log-probs are taken at this temperature", above=0)
    top_p: float = knob(1.0, "nucleus sampling: keep the smallest token set of this much probability (1: off)")
    top_k: int = knob(0, "sample among the k likeliest tokens (0: off)")
    max_tokens: int = knob(256, "the longest response, in tokens", min=1)
    offline_per_group: int = knob(0, "group members replaced by the record's offline responses (below rollout.n)",
                                  min=0)
    offline_accuracy_threshold: float | None = knob(None, "only replace when the group's mean accuracy is below this")
    max_model_len: int = knob(8192, "the engine's window; prompts longer than max_model_len - max_tokens are skipped")
    vllm_gpu_memory_utilization: float = knob(0.3, "vLLM: the share of GPU memory the engine may use")
    vllm_sleep_level: int | None = knob(2, "vLLM between rollouts (GPU): 2 drops the weights too (they are re-synced "
                                           "anyway), 1 keeps them in CPU memory, null never sleeps", choices=(1, 2))
    tensor_parallel_size: int = knob(1, "vLLM TP: each run of this many consecutive ranks (inside one node) shares "
                                        "one engine sharded over their GPUs (TRL's vllm_tensor_parallel_size); they "
                                        "roll out their prompts together", min=1)
    max_num_seqs: int | None = knob(None, "vLLM; null: every sequence of one engine call at once (prompts x n)",
                                    min=1)
    max_num_batched_tokens: int | None = knob(None, "vLLM; null: max(8192, max_model_len), so any admitted prompt's "
                                                    "video fits the encoder cache whole and a prompt prefills in one "
                                                    "chunk", min=1)
    sync_bucket_mb: int = knob(512, "weight sync: shards are cast to the engine's dtype and gathered in all-gathers "
                                    "of at most this many MiB each (a larger tensor goes alone), instead of one "
                                    "collective per tensor", min=1)

    def kind(self, gpu: bool) -> RolloutEngine:
        """The engine `engine` names; auto: vllm on a GPU, hf otherwise."""
        return AUTO_ENGINE[gpu] if self.engine == "auto" else RolloutEngine(self.engine)


@dataclass
class AlgorithmConfig:
    name: str = knob("grpo", "the algorithm: its preset fills the fields left as null", choices=tuple(PRESETS))
    advantage: str | None = knob(None, "grpo (mean/std per group) | mean (Dr. GRPO) | rloo (leave-one-out)",
                                 choices=ADVANTAGES)
    loss_agg: str | None = knob(None, "how token losses are averaged into the loss", choices=LOSS_AGGS)
    ratio: str | None = knob(None, "token (PPO) | sequence (GSPO): the importance ratio clipped", choices=RATIOS)
    clip_low: float | None = knob(None, "the ratio's lower clip: 1 - clip_low")
    clip_high: float | None = knob(None, "the ratio's upper clip: 1 + clip_high (DAPO raises it above clip_low)")
    clip_ratio_c: float | None = knob(None, "dual clip for negative advantages (e.g. 3.0); null: off")
    dynamic_sampling: bool | None = knob(None, "DAPO: drop groups whose rewards are all equal, refill from the data")
    max_sampling_tries: int = knob(4, "extra rollout rounds to refill dropped groups")
    kl: str = knob("none", "penalty against the initial policy, added to the loss (k3: low-variance)",
                   choices=KL_KINDS)
    kl_coef: float = knob(0.0, "the KL penalty's weight (positive when algorithm.kl is set)")
    std_eps: float = knob(1e-6, "added to a group's reward std before dividing (grpo advantages)")
    overlong_buffer: int | None = knob(None, "DAPO overlong shaping: tokens before rollout.max_tokens where the reward "
                                             "falls linearly by up to overlong_penalty (null: the preset's; dapo: "
                                             "max_tokens / 5; 0: off)", min=0)
    overlong_penalty: float = knob(1.0, "the largest overlong shaping penalty (at rollout.max_tokens)")
    mask_truncated: bool = knob(False, "DAPO's overlong filtering: responses cut at max_tokens get no gradient")
    rollout_is: str = knob("token_truncate", "rollout/training mismatch: weight each token's loss by min(pi_train / "
                                             "pi_rollout, cap) where the engine reports its sampling log-probs "
                                             "(vLLM); none: off. TRL corrects this way by default",
                           choices=("token_truncate", "none"))
    rollout_is_cap: float = knob(2.0, "the cap of rollout_is's token weights")


@dataclass
class RewardConfig:
    format_weight: float = knob(0.1, "the format term's weight; accuracy weighs 1 - format_weight")
    format_mode: str = knob("answer_tag", "the format term (scoring.format_score)", choices=FORMAT_MODES)


@dataclass
class TrainLoopConfig:
    steps: int = knob(100, "training steps (a rollout batch each)", min=1)
    prompts_per_step: int = knob(8, "prompts per step, global over all ranks; a multiple of the world size", min=1)
    micro_batch_size: int = knob(8, "sequences per forward/backward ...", min=1)
    max_tokens_per_micro_batch: int | None = knob(None, "... or a token budget (prompt + response, padded) instead",
                                                  min=1)
    balance_ranks: bool = knob(True, "swap groups between ranks so each runs about as many tokens (verl: "
                                     "balance_batch)")
    logprob_chunk: int = knob(512, "response positions per log-softmax chunk (the full-vocab fp32 tensor never "
                                   "exists)", min=1)
    attn_implementation: str = knob("auto", "auto: flash_attention_2 on CUDA when flash-attn is installed, else sdpa",
                                    choices=("auto", "sdpa", "eager", "flash_attention_2", "flash_attention_3"))
    packing: bool | None = knob(None, "padding-free micro-batches; null: where attention is varlen (flash), else "
                                      "padded")
    mini_batches: int | None = knob(None, "optimizer steps per rollout batch (>1 moves the PPO ratio off 1); null: "
                                          "1, or 4 for gspo", min=1)
    ppo_epochs: int = knob(1, "passes over each rollout batch", min=1)
    lr: float = knob(1e-6, "AdamW learning rate", above=0)
    weight_decay: float = knob(0.0, "AdamW weight decay")
    betas: tuple[float, float] = knob((0.9, 0.999), "AdamW betas")
    warmup_steps: int = knob(0, "steps of linear learning-rate warmup (0: none)")
    max_grad_norm: float = knob(1.0, "gradient clipping: the largest global gradient norm")
    gradient_checkpointing: bool = knob(False, "recompute activations in the backward pass (less memory)")
    dtype: str = knob("auto", "auto: bf16 mixed precision on GPU, fp32 on CPU", choices=("auto", "float32", "bfloat16"))
    freeze_vision: bool = knob(False, "train the language model only; the vision tower keeps its weights")


@dataclass
class FSDPConfig:
    shard: str = knob("layer", "layer: one FSDP2 unit per decoder layer and vision block; root: one unit",
                      choices=("layer", "root"))
    shard_size: int | None = knob(None, "ranks each parameter is sharded over (verl's fsdp_size); the world splits "
                                        "into world / shard_size replicas (HSDP: a 2-D mesh, replicate x shard), so "
                                        "per-micro-batch collectives and the weight sync stay inside a replica. null: "
                                        "the ranks of one node (LOCAL_WORLD_SIZE) when the run spans several nodes "
                                        "with several ranks each, else every rank (plain FSDP); 1: pure data parallel "
                                        "(every rank holds the whole model)", min=1)
    backend: str = knob("auto", "the collectives' backend; auto: gloo on CPU, nccl on GPU",
                        choices=("auto", "gloo", "nccl"))
    timeout_s: float = knob(1800.0, "collectives that wait longer fail instead of hanging")
    peer_timeout_s: float = knob(45.0, "a rank that shows no sign of life for this long ends the run on every rank",
                                 above=0)
    offload_rollout: bool = knob(False, "parameter shards and Adam state in host memory while the rollout engine runs "
                                        "(more GPU memory for its KV cache; a copy each way per rollout: "
                                        "train/offload.py)")


@dataclass
class CheckpointConfig:
    every: int = knob(0, "steps between checkpoints (0: only at the end)")
    keep: int = knob(2, "newest checkpoints kept")
    resume: str = knob("auto", "auto: the latest in output_dir, none, or a checkpoint directory")
    export: bool = knob(True, "write a Hugging Face model directory at the end (output_dir/export)")


# RunConfig fields the trainer sets itself: the model is the policy, the engine is each rank's rollout engine (its
# settings are `rollout.*`), the run directory is OUTPUT/validation/step-N, the shard is the rank; a run's judge
# pass is the CLI's, which training does not run.
VALIDATION_OWNED = ("model", "backend", "engine", "server", "shard", "output_dir", "judge_model")


@dataclass
class ValidationConfig:
    every: int = knob(0, "steps between evaluations of the held-out set (0: never)", min=0)
    run: dict[str, Any] = knob({}, "the evaluation's settings, in RunConfig's JSON form (the `vbench-async run` "
                                   "flags, nested as selection.*, sampling.*, frame_overrides.*, prompt.*): e.g. "
                                   "{selection: {benchmarks: [mvbench]}, sampling: {max_tokens: 64}}. "
                                   f"{', '.join(VALIDATION_OWNED)} are the trainer's; cache_dir is data.cache_dir "
                                   "unless set, progress false")
    timeout_s: float = knob(1800.0, "how long a rank that finished its share waits for the others' (then: no scores)",
                            above=0)

    def run_config(self, model: str, output_dir: Path, backend: str, shard: tuple[int, int] | None,
                   cache_dir: str | None = None, engine: VLLMSettings | None = None) -> RunConfig:
        """The `runner.RunConfig` of one validation: `run` read with the flags' checks, plus the trainer's fields."""
        from ..evaluation.runner import RunConfig

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
    tensorboard: bool = knob(False, "write TensorBoard event files under output_dir")
    wandb_project: str | None = knob(None, "log to this Weights & Biases project (null: off)")
    progress: bool = knob(True, "a progress bar on the console (false: one line per step)")
    log_samples: int = knob(2, "completions per step written to samples.jsonl")


@dataclass
class TrainConfig:
    model: str = knob("tiny-qwen2.5-vl", "the policy: a Hugging Face model directory, a hub id or a tiny-*/seeing-* "
                                              "test model's name")
    output_dir: str = knob("runs/train", "where checkpoints, metrics, samples and the export go")
    seed: int = knob(0, "the seed of the data order, the rollouts' sampling and torch")
    data: DataConfig = section(DataConfig, "the training records and their frames")
    rollout: RolloutConfig = section(RolloutConfig, "sampling the groups")
    algorithm: AlgorithmConfig = section(AlgorithmConfig, "the policy-gradient loss")
    reward: RewardConfig = section(RewardConfig, "the reward of a response")
    train: TrainLoopConfig = section(TrainLoopConfig, "the optimization loop")
    fsdp: FSDPConfig = section(FSDPConfig, "sharding over ranks")
    checkpoint: CheckpointConfig = section(CheckpointConfig, "saving and resuming")
    validation: ValidationConfig = section(ValidationConfig, "held-out evaluation during training")
    logging: LoggingConfig = section(LoggingConfig, "what the run reports")

    def to_dict(self) -> dict[str, Any]:
        d = json.loads(json.dumps(dataclasses.asdict(self)))
        d["data"]["frames"] = self.data.frames.to_dict()  # the settings made, as the mapping it was: hashes unchanged
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


# ------------------------------------------------------------------------------------------------ reading


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config, apply `key.sub=value` overrides (values parsed as YAML), check, resolve presets."""
    data = _read_yaml(Path(path)) if path is not None else {}
    for item in overrides or []:
        key, value = _parse_override(item)
        _set_path(data, key.split("."), value)
    cfg = settings.from_json(TrainConfig, _yaml12_floats(data))
    check_config(cfg)
    return resolve_presets(cfg)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml_bounded.load(path.read_text(encoding="utf-8"))  # no alias, bounded depth
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read training config {path}: {exc}") from exc
    if loaded is not None and not isinstance(loaded, dict):
        raise UserError(f"{path}: a training config is a YAML mapping")
    return loaded or {}


def _parse_override(item: str) -> tuple[str, Any]:
    """`key.sub=value` -> ("key.sub", value parsed as YAML; an empty value is null)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"override {item!r} is not KEY=VALUE (e.g. rollout.n=4)")
    try:
        return key.strip(), yaml_bounded.load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise UserError(f"override {item!r}: not valid YAML: {exc}") from exc


def _set_path(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        nxt = data.setdefault(k, {})
        if nxt is None:  # an empty section in the file
            nxt = data[k] = {}
        if not isinstance(nxt, dict):
            raise UserError(f"override {'.'.join(keys)}: {k} is not a section")
        data = nxt
    data[keys[-1]] = value


def _yaml12_floats(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (in place) with a float field's YAML-1.1 string ("1e-6": no dot, so PyYAML reads a string) made the
    number it means; anything else is left for `settings.from_json` to check."""
    for path, _, hint in settings.leaves(TrainConfig):
        node: Any = data
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        value = node.get(path[-1]) if isinstance(node, dict) else None
        if isinstance(value, str) and (hint is float or float in typing.get_args(hint)):
            with contextlib.suppress(ValueError):
                node[path[-1]] = float(value)
    return data


# ------------------------------------------------------------------------------------------------ cross-field checks


def check_config(cfg: TrainConfig) -> None:
    """The checks that relate two fields (one field's bounds and choices are its declaration's: settings.py), with
    messages that say what to change."""
    d, r, t, a = cfg.data, cfg.rollout, cfg.train, cfg.algorithm
    if bool(d.benchmark) == bool(d.records):
        raise UserError("set exactly one of data.benchmark (a card id) and data.records (a unified JSON/JSONL file)")
    if r.max_tokens >= r.max_model_len:
        raise UserError(f"rollout.max_tokens ({r.max_tokens}) must be below rollout.max_model_len "
                        f"({r.max_model_len}): no room is left for the prompt")
    if a.overlong_buffer is not None and a.overlong_buffer >= r.max_tokens:
        raise UserError(f"algorithm.overlong_buffer must be in [0, rollout.max_tokens), got {a.overlong_buffer}")
    if r.tensor_parallel_size > 1 and r.kind(gpu=True) is RolloutEngine.HF:  # hf named, not auto
        raise UserError("rollout.tensor_parallel_size > 1 needs the vllm engine (rollout.engine: vllm or auto on GPU)")
    if r.offline_per_group >= r.n:
        raise UserError(f"rollout.offline_per_group must be in [0, rollout.n), got {r.offline_per_group}")
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
    from ..evaluation.runner import RunConfig

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
