"""transformers `generate`: the reference path, and the backend for machines without vLLM.

Requests are batched: `generate` hands each request to one worker thread (HF generate is not re-entrant), which runs
whatever has arrived as one left-padded `model.generate` call, up to `max_batch_size` requests. The requests that
arrive while a batch runs make up the next one; nothing waits for a batch to fill. A batch holds prompts of about
the same length (within PAD_RATIO, estimated from the text and the frames): each row is padded to the longest, and
padding is compute spent on nothing (mixing 1,600- and 300-token prompts made a batch slower on CPU than its
requests one at a time). Only requests that give the same
answers batched as alone are batched together: greedy, one sample (n=1), equal sampling settings, and no request
with images but no video beside one with a video (the family's video hand-off kwargs, do_resize=False, apply to a
call's images too). Prompts with and without a video mix (checked per family in tests/test_hf_batching.py).
Sampling and n>1 run alone, so a seeded answer does not depend on which other requests happened to be in flight.
When a batch fails, its requests run again one at a time, so each gets its own answer or its own error.

The frames and their source metadata go to the processor with the family's hand-off kwargs (do_sample_frames=False,
do_resize=False), as for vLLM.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import EngineDead, SampleError
from ..failure_kinds import FailureKind
from ..families import handoff_for
from ..families.release_positions import use_release_positions
from .base import Completion, Request, messages_for

log = logging.getLogger(__name__)

BATCH_CPU, BATCH_CUDA = 8, 32  # default max_batch_size per device kind
IDLE_S = 2.0  # the batching worker thread ends after this long without requests
PAD_RATIO = 2.0  # a batch holds prompts at most this many times longer or shorter than its oldest one


@dataclass
class _Job:
    request: Request
    submitted: float = field(default_factory=time.perf_counter)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class HFBackend:
    name = "hf"

    def __init__(self, model: str, dtype: str = "auto", device: str | None = None, max_batch_size: int | None = None):
        """`max_batch_size`: the most requests one `generate` call runs (None: 32 on CUDA, 8 on CPU; 1: one at a
        time, the path before batching)."""
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.model_path = model
        self.dtype = dtype
        self.device = device
        self.max_batch_size = max_batch_size
        self.model = None
        self.processor = None
        self.batch_sizes: deque[int] = deque(maxlen=4096)  # the sizes of the latest batches (lone requests: 1)
        self._lock = threading.Lock()  # one `model.generate` at a time
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._worker_guard = threading.Lock()

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._load)

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if (self.dtype == "auto" and self.device == "cuda") else torch.float32
        self.processor = AutoProcessor.from_pretrained(self.model_path)
        self.model = AutoModelForImageTextToText.from_pretrained(self.model_path, dtype=dtype).to(self.device).eval()
        use_release_positions(self.model)  # the text after a video where vLLM and the release put it

    async def close(self) -> None:
        self.model = None
        with self._worker_guard:
            if self._worker is not None:
                self._jobs.put(None)  # the worker fails what is still queued (EngineDead) and ends
                self._worker = None

    def batch_limit(self) -> int:
        if self.max_batch_size is not None:
            return self.max_batch_size
        return BATCH_CUDA if str(self.device or "cpu").startswith("cuda") else BATCH_CPU

    def describe(self) -> dict[str, Any]:
        import transformers

        return {"backend": self.name, "transformers_version": transformers.__version__, "device": self.device,
                "dtype": self.dtype, "max_batch_size": self.batch_limit()}

    # -- inputs ------------------------------------------------------------------------------------------------------

    def inputs(self, request: Request):
        """The processor's output for one request (a batch of one, unpadded)."""
        return self.batch_inputs([request])

    def batch_inputs(self, requests: list[Request]):
        """The processor's output for several requests: their texts left-padded to one length, their videos and
        images concatenated in request order (each prompt's placeholders take the next ones)."""
        texts = [self.processor.apply_chat_template(messages_for(r), tokenize=False, add_generation_prompt=True)
                 for r in requests]
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt"}
        if len(requests) > 1:
            kwargs.update(padding=True, padding_side="left")  # generation continues every row at its right end
        videos = [v for r in requests for v in r.videos]
        if videos:
            kwargs["videos"] = [v.frames for v in videos]
            kwargs["video_metadata"] = [dict(v.metadata) for v in videos]
            kwargs.update(handoff_for(self.model_path).hf_processor_kwargs)  # the family's hand-off
        images = [img.pixels for r in requests for img in r.images]
        if images:
            kwargs["images"] = images
        batch = self.processor(**kwargs)
        batch.pop("video_metadata", None)  # returned by the processor, not a model input
        return batch

    def generation_config(self, request: Request):
        """The checkpoint's generation_config (its stop and pad tokens) with every sampling field set from the
        request: a repetition_penalty or top_k in generation_config.json must not change the answers silently."""
        import copy

        s = request.sampling
        config = copy.deepcopy(self.model.generation_config)
        sample = s.temperature > 0
        config.update(
            max_new_tokens=s.max_tokens, num_return_sequences=request.n, do_sample=sample, num_beams=1,
            temperature=s.temperature if sample else 1.0, top_p=s.top_p if sample else 1.0,
            top_k=s.top_k if sample and s.top_k > 0 else None, min_p=None, typical_p=1.0,
            repetition_penalty=s.repetition_penalty, no_repeat_ngram_size=0, encoder_repetition_penalty=1.0,
            length_penalty=1.0, max_length=None, min_length=0, min_new_tokens=None, bad_words_ids=None,
        )
        return config

    def _stop_ids(self, config) -> set[int]:
        """The tokens `generate` stops a row at: the generation config's EOS ids (else the tokenizer's)."""
        eos = config.eos_token_id
        if eos is None:
            eos = self.processor.tokenizer.eos_token_id
        return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    # -- generation --------------------------------------------------------------------------------------------------

    @staticmethod
    def batch_key(request: Request) -> tuple | None:
        """Requests with equal keys may share one `generate` call with the answers each gets alone; None: alone."""
        if request.n != 1 or request.sampling.temperature > 0:
            return None  # n>1 / sampling: one random stream per request, seeded as before
        # The video hand-off kwargs (do_resize=False) apply to a whole call, images included: an image without a
        # video, resized when alone, must not share a call with a video. Text-only prompts go with either.
        return request.sampling, bool(request.images) and not request.videos

    def _generate(self, request: Request, submitted: float | None = None) -> Completion:
        """One request alone (the reference path; `generate` batches)."""
        import torch

        start = time.perf_counter() if submitted is None else submitted
        s = request.sampling
        with self._lock:
            model = self._model()
            batch = self.inputs(request).to(self.device)
            config = self.generation_config(request)
            if s.temperature > 0:
                torch.manual_seed(s.seed)
            with torch.inference_mode():
                out = model.generate(**batch, generation_config=config)
        prompt_len = batch["input_ids"].shape[1]
        return self._completion(request, out[:, prompt_len:], prompt_len, self._stop_ids(config),
                                time.perf_counter() - start)

    def _generate_batch(self, requests: list[Request], submitted: list[float]) -> list[Completion]:
        """Requests of one `batch_key` as one left-padded `generate` call; each completion as if it ran alone."""
        import torch

        assert len({self.batch_key(r) for r in requests}) == 1 and self.batch_key(requests[0]) is not None
        with self._lock:
            model = self._model()
            batch = self.batch_inputs(requests).to(self.device)
            config = self.generation_config(requests[0])
            with torch.inference_mode():
                out = model.generate(**batch, generation_config=config)
        end = time.perf_counter()
        width = batch["input_ids"].shape[1]
        prompt_lens = batch["attention_mask"].sum(dim=1).tolist()  # without the padding
        stop = self._stop_ids(config)
        return [self._completion(r, out[i:i + 1, width:], int(prompt_lens[i]), stop, end - t)
                for i, (r, t) in enumerate(zip(requests, submitted))]

    def _model(self):
        if self.model is None:
            raise EngineDead("the HF model is not loaded")
        return self.model

    def _completion(self, request: Request, new, prompt_len: int, stop: set[int], latency_s: float) -> Completion:
        """A completion from the generated rows of one request: each row cut after its first stop token (a finished
        row of a batch goes on with padding until the batch ends)."""
        rows = []
        for row in new.tolist():
            cut = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
            rows.append(row[:cut])
        texts = self.processor.batch_decode(rows, skip_special_tokens=True)
        finished = bool(rows[0]) and rows[0][-1] in stop
        return Completion(
            text=texts[0],
            prompt_tokens=int(prompt_len),
            output_tokens=sum(len(r) for r in rows),
            finish_reason="stop" if finished else "length",
            latency_s=latency_s,
            texts=texts if request.n > 1 else None,
            token_ids=rows,
        )

    async def generate(self, request: Request) -> Completion:
        if self.model is None:
            raise EngineDead("the HF model is not loaded")
        job = _Job(request)
        self._submit(job)
        try:
            return await asyncio.wrap_future(job.future)  # cancelling the wait withdraws a request not yet started
        except (EngineDead, SampleError):
            raise
        except (ValueError, RuntimeError, IndexError) as exc:
            raise SampleError(FailureKind.ENGINE_ERROR, f"{type(exc).__name__}: {exc}") from exc

    # -- the batching worker -----------------------------------------------------------------------------------------

    def _submit(self, job: _Job) -> None:
        with self._worker_guard:
            if self._worker is None:
                self._jobs = queue.SimpleQueue()
                self._worker = threading.Thread(target=self._serve, args=(self._jobs,), name="hf-generate",
                                                daemon=True)
                self._worker.start()
            self._jobs.put(job)

    def _serve(self, jobs: queue.SimpleQueue) -> None:
        """The worker: take what has arrived, run the oldest request with those of its key (up to the batch limit),
        repeat. It ends after IDLE_S without requests (a later request starts another) or at a None in its queue
        (close), failing what is left then with EngineDead."""
        pending: deque[_Job] = deque()
        closing = False
        while not closing:
            if not pending:
                try:
                    job = jobs.get(timeout=IDLE_S)
                except queue.Empty:
                    with self._worker_guard:  # requests are queued under the guard: none can slip in now
                        if jobs.empty():
                            if self._jobs is jobs:
                                self._worker = None
                            return
                    continue
                if job is None:
                    break
                pending.append(job)
            while True:  # everything that arrived meanwhile
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    closing = True
                    break
                pending.append(job)
            if closing:
                break
            batch = self._take(pending)
            try:
                self._run(batch)
            except BaseException as exc:  # never leave a waiter without an answer
                for j in batch:
                    if not j.future.done():
                        j.future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
        for j in pending:
            if j.future.set_running_or_notify_cancel():
                j.future.set_exception(EngineDead("the HF backend was closed"))

    def prompt_size(self, request: Request) -> float:
        """About how many tokens the prompt takes (text, then a token per merged patch of the frames and images):
        enough to batch prompts of similar length, since each row is padded to the longest."""
        vp = getattr(self.processor, "video_processor", None)
        patch = getattr(vp, "patch_size", None) or 14
        merge = getattr(vp, "merge_size", None) or 2
        temporal = getattr(vp, "temporal_patch_size", None) or 2
        per_token = 3 * (patch * merge) ** 2  # uint8 values per token of an image
        pixels = sum(v.frames.size / temporal for v in request.videos) + sum(i.pixels.size for i in request.images)
        return len(request.prompt) / 4 + pixels / per_token

    def _take(self, pending: deque[_Job]) -> list[_Job]:
        """The oldest pending request and the next ones of its batch key whose prompts are of about its length
        (within PAD_RATIO: padding is compute spent on nothing), their order kept, up to the limit."""
        first = pending.popleft()
        key = self.batch_key(first.request)
        batch = [first]
        if key is None:
            return batch
        kept: list[_Job] = []
        limit, size = self.batch_limit(), self.prompt_size(first.request)
        while pending:
            job = pending.popleft()
            if (len(batch) < limit and self.batch_key(job.request) == key
                    and max(size, 1) / PAD_RATIO <= self.prompt_size(job.request) <= max(size, 1) * PAD_RATIO):
                batch.append(job)
            else:
                kept.append(job)
        pending.extend(kept)
        return batch

    def _run(self, batch: list[_Job]) -> None:
        live = [j for j in batch if j.future.set_running_or_notify_cancel()]  # drops the cancelled
        if not live:
            return
        self.batch_sizes.append(len(live))
        if len(live) > 1:
            try:
                completions = self._generate_batch([j.request for j in live], [j.submitted for j in live])
            except EngineDead as exc:
                for j in live:
                    j.future.set_exception(exc)
                return
            except Exception as exc:  # noqa: BLE001 - one bad request must not fail the others: run them alone
                log.warning("a batch of %d requests failed (%s: %s); running them one at a time", len(live),
                            type(exc).__name__, exc)
            else:
                for j, c in zip(live, completions):
                    j.future.set_result(c)
                return
        for j in live:
            try:
                j.future.set_result(self._generate(j.request, j.submitted))
            except Exception as exc:  # noqa: BLE001 - that request's own error, raised by its `generate`
                j.future.set_exception(exc)
