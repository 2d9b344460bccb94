"""In-process vLLM `AsyncLLM` backend (vLLM V1; `AsyncLLMEngine` is an alias of the same class).

Videos go in as `(frames, metadata)` tuples with the processor kwargs the model's family declares (every family here:
`do_sample_frames=False` and `do_resize=False`): the frame cache already sampled and resized them, and the metadata
(source fps, source frame indices) is what Qwen3-VL's timestamps and Qwen2.5-VL's temporal M-RoPE are computed from.
The cache key is passed as the multimodal uuid, so repeated questions on one video reuse vLLM's processed-input cache
and the prefix cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import EngineDead, SampleError
from ..families import handoff_for
from .base import Completion, Request, messages_for
from .guard import OrphanGuard

log = logging.getLogger(__name__)

# On CPU the engine core is killed at once: measured, it never finished its SIGTERM teardown within 0.5 s, after
# which vLLM killed it anyway; the user waited that half second for nothing.
CPU_SHUTDOWN_S = 0.0
UNPLANNED_MAX_MODEL_LEN = 8192  # the context when no plan sized it (a judge engine, a run whose plan failed)
CPU_KV_CACHE_BYTES = 64 << 20  # the KV cache on CPU unless set: enough for the tiny models' tests and demos


@dataclass
class VLLMSettings:
    """Engine knobs; those with a `help` are command-line flags (`cli/options.py`). `kv_cache_bytes` matters on CPU:
    without it vLLM takes 90% of RAM."""

    max_model_len: int | None = field(default=None, metadata={
        "help": "context length the engine reserves per sequence (default: the longest planned prompt + the answer's "
                "max tokens + a margin, capped by the model's max_position_embeddings; 8192 when nothing was planned)"})
    max_num_seqs: int = field(default=16, metadata={"help": "sequences the engine runs at once"})
    max_num_batched_tokens: int | None = field(
        default=None, metadata={"help": "per-step token budget (chunked prefill size; default: vLLM's, raised to the "
                                        "largest planned video's embeddings)"})
    gpu_memory_utilization: float = field(default=0.85, metadata={"help": "share of GPU memory vLLM may use"})
    kv_cache_bytes: int | None = field(default=None, metadata={
        "flag": "--kv-cache-memory-bytes", "aliases": ("--kv-cache-bytes",),  # vLLM's name; the old one still works
        "help": "explicit KV cache size in bytes (default on CPU: 64 MiB; else from memory utilisation)"})
    tensor_parallel_size: int = field(default=1, metadata={"help": "GPUs per engine replica"})
    # Engine replicas in this process's node; vLLM balances requests across them.
    data_parallel_size: int = field(default=1, metadata={"help": "engine replicas on this node"})
    # With several replicas, all questions of a video go to one (its prefix cache).
    dp_video_affinity: bool = field(default=True, metadata={
        "flag": "--no-video-affinity",
        "help": "with several data-parallel replicas, let vLLM's load balancer place every request instead of sending "
                "all questions of one video to the same replica (which reuses its prefix cache)"})
    dtype: str = field(default="auto", metadata={"help": "weights dtype (auto: the checkpoint's; bfloat16 on CPU)"})
    enforce_eager: bool = field(default=False, metadata={"help": "disable CUDA graphs / torch.compile"})
    enable_prefix_caching: bool = True
    mm_processor_cache_gb: float | None = None  # None: vLLM's default; 0 disables the processed-input cache
    max_images: int = 1
    max_videos: int = 1
    seed: int = 0
    # Profile vLLM's memory with a dummy video of the run's real size, not the model's maximum (start-up time).
    profile_frames: int | None = None
    profile_pixels: int | None = None
    profile_height: int | None = None  # the largest video's exact frame size, from the plan (wins over pixels)
    profile_width: int | None = None
    min_kv_cache_bytes: int = 0  # on CPU the KV cache is a fixed size: at least this (one sequence of the context)


def replica_for(key: str, replicas: int) -> int:
    """A stable replica index for `key` (the same in every process and run, unlike Python's hash())."""
    return int.from_bytes(hashlib.blake2b(str(key).encode(), digest_size=8).digest(), "big") % replicas


def on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform
    except ImportError:  # pragma: no cover - vllm missing is reported at start()
        return True
    return current_platform.is_cpu()


def engine_kwargs(model: str, s: VLLMSettings, cpu: bool) -> dict[str, Any]:
    """vLLM's engine arguments for `model` under `s`: the one place they are built, for the evaluation's `AsyncLLM`
    (`VLLMBackend.engine_args`) and training's colocated `LLM` (train/vllm_rollout.py), which adds its own few."""
    kwargs: dict[str, Any] = dict(
        model=model,
        dtype=("bfloat16" if cpu and s.dtype == "auto" else s.dtype),
        max_model_len=s.max_model_len or UNPLANNED_MAX_MODEL_LEN,
        max_num_seqs=s.max_num_seqs,
        tensor_parallel_size=s.tensor_parallel_size,
        data_parallel_size=s.data_parallel_size,
        enforce_eager=s.enforce_eager or cpu,  # torch.compile on CPU costs ~30 s of start-up for tiny gains
        enable_prefix_caching=s.enable_prefix_caching,
        limit_mm_per_prompt=_mm_limit(s),
        seed=s.seed,
        disable_log_stats=True,
    )
    if s.mm_processor_cache_gb is not None:
        kwargs["mm_processor_cache_gb"] = s.mm_processor_cache_gb
    if s.max_num_batched_tokens:
        kwargs["max_num_batched_tokens"] = s.max_num_batched_tokens
    return {**kwargs, **_memory(s, cpu)}


def _memory(s: VLLMSettings, cpu: bool) -> dict[str, Any]:
    """How much memory the engine takes: an explicit KV cache size, else on CPU a fixed one (vLLM would reserve 90% of
    the RAM; at least one sequence of the context, `min_kv_cache_bytes`), else a share of the GPU's memory."""
    kv = s.kv_cache_bytes if s.kv_cache_bytes is not None else (max(CPU_KV_CACHE_BYTES, s.min_kv_cache_bytes) if cpu
                                                                  else None)
    if kv is not None:
        return {"kv_cache_memory_bytes": kv}
    return {"gpu_memory_utilization": s.gpu_memory_utilization}


def _mm_limit(s: VLLMSettings) -> dict[str, Any]:
    """Media per prompt; with the run's largest video known (the plan), the engine is profiled, and its encoder cache
    sized, for exactly that video rather than the model's maximum."""
    limit: dict[str, Any] = {"video": s.max_videos, "image": s.max_images}
    if s.profile_frames and s.profile_height and s.profile_width:
        limit["video"] = {"count": s.max_videos, "num_frames": s.profile_frames, "width": s.profile_width,
                          "height": s.profile_height}
    elif s.profile_frames and s.profile_pixels:
        # vLLM >= 0.11 accepts per-modality dummy sizes: profile with the run's real budget.
        side = int(s.profile_pixels**0.5)
        limit["video"] = {"count": s.max_videos, "num_frames": s.profile_frames, "width": side, "height": side}
    return limit


class VLLMBackend:
    name = "vllm"

    def __init__(self, model: str, settings: VLLMSettings | None = None):
        self.model = model
        self.settings = settings or VLLMSettings()
        self.engine = None
        self._guard: OrphanGuard | None = None
        self._processor = None
        self._sampling_cache: dict[Any, Any] = {}

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def engine_args(self):
        from vllm.engine.arg_utils import AsyncEngineArgs

        return AsyncEngineArgs(**engine_kwargs(self.model, self.settings, on_cpu()))

    async def start(self) -> None:
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        loop = asyncio.get_running_loop()
        built: asyncio.Future = loop.create_future()
        cancelled = threading.Event()

        def build() -> None:
            # Runs in a thread with no event loop, so the engine binds its output handler to the caller's loop at the
            # first request; meanwhile the caller's loop keeps loading frames.
            try:
                # Imported here, not on the loop: `import vllm` takes 10-15 s, during which Ctrl-C would wait.
                try:
                    from vllm.v1.engine.async_llm import AsyncLLM
                except ImportError as exc:
                    raise RuntimeError("vLLM is not installed: on a GPU machine `pip install -e '.[vllm]'`; on CPU "
                                       "run scripts/setup_env.sh") from exc
                from transformers import AutoProcessor

                s = self.settings
                if on_cpu() and s.tensor_parallel_size * s.data_parallel_size == 1:
                    # One CPU worker: run it inside the engine-core process rather than spawning a third interpreter
                    # (vLLM allows its single-process executor on CPU only through this variable): one `import vllm`
                    # less.
                    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
                self._processor = AutoProcessor.from_pretrained(self.model)
                engine = None if cancelled.is_set() else AsyncLLM.from_engine_args(self.engine_args())
                if engine is not None and cancelled.is_set():  # Ctrl-C came while it started: nobody will use it
                    engine.shutdown(timeout=CPU_SHUTDOWN_S if on_cpu() else None)
                    engine = None
                # Handed over here, and the local dropped: a reference left in the future or in this thread's frame
                # would outlive close(), and the engine's __del__ would then run during interpreter teardown and fail.
                self.engine, engine = engine, None
                outcome = (built.set_result, None)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                outcome = (built.set_exception, exc)
            try:
                loop.call_soon_threadsafe(lambda: built.done() or outcome[0](outcome[1]))
            except RuntimeError:  # the loop is closed: the run was interrupted and has moved on
                pass

        # The engine-core processes would outlive a SIGKILLed front end (idle, holding their memory; during start-up,
        # waiting forever for a handshake): guard every child started from here on, before the engine spawns any.
        self._guard = OrphanGuard(watch_children=True)
        # A daemon thread, not the loop's executor: on Ctrl-C the run must not wait for a minute-long start-up to
        # finish only to shut the engine down (asyncio.run joins executor threads, the interpreter joins those of
        # concurrent.futures).
        threading.Thread(target=build, name="vllm-start", daemon=True).start()
        try:
            await built
        except asyncio.CancelledError:
            # Ctrl-C while the engine starts: the thread shuts it down if it gets that far; if this process exits
            # first, the guard (left armed) stops the engine core, which it is told of now in case it spawned since
            # the watcher's last look.
            cancelled.set()
            self._guard.adopt_children()
            raise
        except BaseException:
            self._guard.disarm()  # vLLM stops what it started when its start-up fails
            self._guard = None
            raise

    async def close(self) -> None:
        if self.engine is not None:
            # Every result is on disk by now. vLLM gives its engine-core process 5 s to tear down after SIGTERM;
            # on CPU there is nothing to release that the kernel does not reclaim, so it is killed without a wait.
            self.engine.shutdown(timeout=CPU_SHUTDOWN_S if on_cpu() else None)
            self.engine = None
        if self._guard is not None:
            self._guard.disarm()
            self._guard = None

    def describe(self) -> dict[str, Any]:
        try:
            import vllm

            version = vllm.__version__
        except ImportError:  # pragma: no cover
            version = None
        return {"backend": self.name, "vllm_version": version, "cpu": on_cpu(), **asdict(self.settings)}

    # -- requests --------------------------------------------------------------------------------------------------
    def render_prompt(self, request: Request) -> str:
        return render_prompt(self._processor, request)

    def engine_input(self, request: Request) -> dict[str, Any]:
        return engine_input(self._processor, self.model, request)

    def sampling_params(self, request: Request):
        from vllm.sampling_params import RequestOutputKind

        key = (request.sampling, request.n)
        sp = self._sampling_cache.get(key)
        if sp is None:  # one message per request, not one per token
            sp = self._sampling_cache[key] = sampling_params(request, output_kind=RequestOutputKind.FINAL_ONLY)
        return sp

    def _routing(self, request: Request) -> dict[str, Any]:
        """Pin a video's requests to one data-parallel replica, so its prefix cache and encoder cache are reused;
        vLLM's own load balancer would spread the questions of one video over all replicas."""
        s = self.settings
        if s.data_parallel_size <= 1 or not s.dp_video_affinity or not request.videos:
            return {}
        return {"data_parallel_rank": replica_for(request.videos[0].uuid, s.data_parallel_size)}

    async def generate(self, request: Request) -> Completion:
        from vllm.v1.engine.exceptions import EngineDeadError

        try:  # vLLM >= 0.12 raises its own exception types for a rejected request (prompt too long, bad parameter)
            from vllm.exceptions import VLLMClientError
        except ImportError:  # pragma: no cover - older vLLM: ValueError, caught below
            VLLMClientError = ValueError
        if self.engine is None:
            raise EngineDead("the vLLM engine is not running")
        start = time.perf_counter()
        first = None
        final = None
        try:
            async for out in self.engine.generate(
                self.engine_input(request), self.sampling_params(request), request.request_id,
                **self._routing(request),
            ):
                first = first or time.perf_counter()
                final = out
        except EngineDeadError as exc:
            raise EngineDead(f"the vLLM engine died: {exc}") from exc
        except (ValueError, RuntimeError, TypeError, VLLMClientError) as exc:
            # vLLM rejects one bad input (prompt too long, processor error) without dying: a per-sample failure.
            if self.engine is not None and getattr(self.engine, "errored", False):
                raise EngineDead(f"the vLLM engine died: {exc}") from exc
            raise SampleError("engine_error", f"{type(exc).__name__}: {exc}") from exc
        end = time.perf_counter()
        if final is None:
            raise SampleError("engine_error", "the engine returned no output")
        outs = final.outputs
        return Completion(
            text=outs[0].text,
            prompt_tokens=len(final.prompt_token_ids or ()),
            output_tokens=sum(len(o.token_ids) for o in outs),
            finish_reason=outs[0].finish_reason,
            latency_s=end - start,
            engine_wait_s=(first or end) - start,
            texts=[o.text for o in outs] if request.n > 1 else None,
            token_ids=[list(o.token_ids) for o in outs],
            prompt_token_ids=list(final.prompt_token_ids or ()),
        )


# -- the request mappings, shared with the RL rollout engine (train/vllm_rollout.py) --------------------------------
def render_prompt(processor: Any, request: Request) -> str:
    """The chat-templated prompt text vLLM receives for `request`."""
    return processor.apply_chat_template(messages_for(request), tokenize=False, add_generation_prompt=True)


def engine_input(processor: Any, model: str, request: Request) -> dict[str, Any]:
    """`request` as vLLM's prompt dict: the rendered text, cached `(frames, metadata)` tuples with the family's
    processor kwargs, images, and the cache keys as multimodal uuids."""
    inp: dict[str, Any] = {"prompt": render_prompt(processor, request)}
    mm: dict[str, Any] = {}
    uuids: dict[str, Any] = {}
    if request.videos:
        mm["video"] = [(v.frames, {**v.metadata, "do_sample_frames": False}) for v in request.videos]
        uuids["video"] = [v.uuid for v in request.videos]
        inp["mm_processor_kwargs"] = dict(handoff_for(model).vllm_processor_kwargs)
    if request.images:
        mm["image"] = [img.pixels for img in request.images]
        uuids["image"] = [img.uuid for img in request.images]
    if mm:
        inp["multi_modal_data"] = mm
        inp["multi_modal_uuids"] = uuids
    return inp


def sampling_params(request: Request, **extra: Any):
    """vLLM's `SamplingParams` for `request`: every field of the run's sampling settings, the rest neutral (nothing
    comes from the checkpoint's generation_config); `extra` adds engine-side fields (output kind, logit bias,
    log-probs) that are not sampling settings."""
    from vllm import SamplingParams

    s = request.sampling
    return SamplingParams(
        n=request.n,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k if s.top_k > 0 else -1,
        max_tokens=s.max_tokens,
        seed=s.seed,
        repetition_penalty=s.repetition_penalty,
        presence_penalty=s.presence_penalty,
        frequency_penalty=0.0,
        min_p=0.0,
        **extra,
    )
