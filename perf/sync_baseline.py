"""The synchronous baseline for perf/pipeline.py: how lmms-eval's vLLM backend evaluates video.

Start the offline `vllm.LLM` engine, then for each fixed-size batch of questions decode every question's video inline
(no cache: a video asked about four times is decoded four times), call `llm.generate` on the batch and wait for all of
it, then score. Same tiny model, same frame spec, same prompts and scorers as `vbench-async run`.

Usage: python perf/sync_baseline.py --model tiny-qwen2.5-vl --suite demo --batch-size 8 --max-tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny-qwen2.5-vl")
    ap.add_argument("--suite", default="demo")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-frames", type=int, help="frame cap override, as `vbench-async run --max-frames`")
    ap.add_argument("--max-pixels", type=int, help="per-frame pixel cap override")
    args = ap.parse_args()
    overrides = {k: v for k, v in (("max_frames", args.max_frames), ("max_pixels", args.max_pixels)) if v}
    started = time.perf_counter()
    # In-process engine (no engine-core subprocess): the fastest start-up the offline LLM has on CPU, so the
    # baseline is not slowed by anything the async harness avoids.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

    from transformers import AutoProcessor
    from vllm import LLM, SamplingParams

    from vbench_async import models
    from vbench_async.backends.base import Request, VideoInput, messages_for
    from vbench_async.benchmarks import resolve_benchmarks
    from vbench_async.frames.decode_video import decode_video
    from vbench_async.frames.video import CachedVideo
    from vbench_async.scoring import score

    model = models.resolve(args.model)
    llm = LLM(model=model.path, dtype="bfloat16", max_model_len=8192, enforce_eager=True, seed=0,
              limit_mm_per_prompt={"video": 1, "image": 1}, kv_cache_memory_bytes=64 << 20)
    processor = AutoProcessor.from_pretrained(model.path)
    sp = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, seed=0)

    work = []
    for bench in resolve_benchmarks(args.suite, None):
        spec = bench.frame_spec(model.family, overrides)
        for s in bench.load_samples(None):
            work.append((bench, s, spec))

    decode_s = engine_s = 0.0
    correct = 0.0
    for i in range(0, len(work), args.batch_size):
        batch, inputs = work[i:i + args.batch_size], []
        t0 = time.perf_counter()
        for bench, s, spec in batch:
            frames, meta = decode_video(bench.video_path(s, None), spec, s.window)  # inline, every question
            metadata = CachedVideo(key="", frames=frames, meta=meta).hf_metadata()
            req = Request(request_id=s.key, prompt=bench.render_prompt(s), videos=(VideoInput(frames, metadata, ""),))
            text = processor.apply_chat_template(messages_for(req), tokenize=False, add_generation_prompt=True)
            inputs.append({"prompt": text,
                           "multi_modal_data": {"video": [(frames, {**metadata, "do_sample_frames": False})]},
                           "mm_processor_kwargs": {"do_resize": False, "do_sample_frames": False}})
        t1 = time.perf_counter()
        outs = llm.generate(inputs, sp, use_tqdm=False)  # blocks until the whole batch is done
        t2 = time.perf_counter()
        decode_s += t1 - t0
        engine_s += t2 - t1
        for (_bench, s, _), out in zip(batch, outs):
            correct += score(s, out.outputs[0].text).value
    print(json.dumps({"questions": len(work), "wall_s": round(time.perf_counter() - started, 3),
                      "decode_s": round(decode_s, 3), "engine_s": round(engine_s, 3),
                      "mean_score": round(correct / max(len(work), 1), 4)}))
    sys.stdout.flush()
    llm.llm_engine.engine_core.shutdown()
    os._exit(0)  # skip the rest of vLLM's interpreter-exit teardown


if __name__ == "__main__":
    main()
