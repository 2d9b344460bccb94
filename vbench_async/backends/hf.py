"""transformers `generate`: the reference path, and the backend for machines without vLLM.

One request at a time in a worker thread (HF generate is not re-entrant); slow but simple and exact. The frames and
their source metadata go to the processor with the family's hand-off kwargs (do_sample_frames=False, do_resize=False),
as for vLLM.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from ..errors import EngineDead, SampleError
from ..families import handoff_for
from .base import Completion, Request, messages_for


class HFBackend:
    name = "hf"

    def __init__(self, model: str, dtype: str = "auto", device: str | None = None):
        self.model_path = model
        self.dtype = dtype
        self.device = device
        self.model = None
        self.processor = None
        self._lock = threading.Lock()

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._load)

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if (self.dtype == "auto" and self.device == "cuda") else torch.float32
        self.processor = AutoProcessor.from_pretrained(self.model_path)
        self.model = AutoModelForImageTextToText.from_pretrained(self.model_path, dtype=dtype).to(self.device).eval()

    async def close(self) -> None:
        self.model = None

    def describe(self) -> dict[str, Any]:
        import transformers

        return {"backend": self.name, "transformers_version": transformers.__version__, "device": self.device,
                "dtype": self.dtype}

    def inputs(self, request: Request):
        text = self.processor.apply_chat_template(messages_for(request), tokenize=False, add_generation_prompt=True)
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if request.videos:
            kwargs["videos"] = [v.frames for v in request.videos]
            kwargs["video_metadata"] = [dict(v.metadata) for v in request.videos]
            kwargs.update(handoff_for(self.model_path).hf_processor_kwargs)  # the family's hand-off
        if request.images:
            kwargs["images"] = [img.pixels for img in request.images]
        batch = self.processor(**kwargs)
        batch.pop("video_metadata", None)  # returned by the processor, not a model input
        return batch

    def _generate(self, request: Request) -> Completion:
        import torch

        s = request.sampling
        start = time.perf_counter()
        with self._lock:
            batch = self.inputs(request).to(self.device)
            if s.temperature > 0:
                torch.manual_seed(s.seed)
            with torch.inference_mode():
                out = self.model.generate(**batch, generation_config=self.generation_config(request))
        prompt_len = batch["input_ids"].shape[1]
        new = out[:, prompt_len:]
        texts = self.processor.batch_decode(new, skip_special_tokens=True)
        eos = self.processor.tokenizer.eos_token_id
        n_tokens = [int((row != eos).sum()) + (1 if eos in row.tolist() else 0) for row in new]
        return Completion(
            text=texts[0],
            prompt_tokens=int(prompt_len),
            output_tokens=sum(n_tokens),
            finish_reason="stop" if eos in new[0].tolist() else "length",
            latency_s=time.perf_counter() - start,
            texts=texts if request.n > 1 else None,
            token_ids=[row.tolist() for row in new],
        )

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

    async def generate(self, request: Request) -> Completion:
        if self.model is None:
            raise EngineDead("the HF model is not loaded")
        try:
            return await asyncio.get_running_loop().run_in_executor(None, self._generate, request)
        except (ValueError, RuntimeError, IndexError) as exc:
            raise SampleError("engine_error", f"{type(exc).__name__}: {exc}") from exc
