"""A prepared GPU check of the trainer: FSDP2 over NCCL, mixed batches, checkpoint + resume, vLLM sleep/wake + sync,
training that sees the pixels.

    PYTHONPATH=. .venv/bin/python perf/gpu_train_check.py                 # every visible GPU (1-8)
    PYTHONPATH=. .venv/bin/python perf/gpu_train_check.py --cpu-dry-run   # the same steps on CPU/gloo, 2 processes

First, before any process group exists, every model the check needs is resolved and built (tiny models with random
weights; a failure there is reported at once, not as a half-built directory in the first launch). Then for each
model (default: tiny Qwen2.5-VL and tiny Qwen3-VL; a model directory such as a seeing model's checkpoint is accepted
too), on one machine:
  1. run A: `torchrun --nproc_per_node N -m vbench_async.train`, `--steps` (3) GRPO steps, FSDP2 per layer (NCCL on
     GPU), each rank's prompts a mix of video, image and text records, rollouts on the colocated vLLM engine when vLLM
     and CUDA are there (it sleeps at level 2 between rollouts and gets the weights synced every step), else HF
     generate; a sharded checkpoint after every step;
  2. run B: a fresh launch resumed from A's step-1 checkpoint, to the last step; the figure reported is the largest
     difference between A's and B's last weights (0 on CPU; bf16 compute and vLLM sampling on GPU need not be
     bitwise repeatable, so there it is reported, not required to be 0);
  3. (vLLM + CUDA only) in one process: greedy text -> weights synced with a perturbed copy -> the text changes ->
     the original weights synced back -> the first text again, with a level-2 sleep after every generate;
  4. padded vs packed log-probs of one mixed micro-batch (video, image, both, text; groups sharing media; one
     empty response): on GPU in bf16 with flash-attention 2 where flash-attn is installed (the path
     `train.packing: null` packs on), else sdpa with the block-diagonal mask (fp32 sdpa in the CPU rehearsal); the
     packed-vs-padded difference must stay within the difference between two attention kernels (eager vs the one
     used) on the same padded batch, or 2e-2;
  5. training sees the pixels (vbench_async/train/vision_check.py, the trainer's own start-up check, which runs A and
     B also pass before their step 1): on the same micro-batch, in the same dtype, the log-probs change when the
     pixels are replaced and the vision tower gets a non-zero gradient; and the same model with a forward that drops
     `mm_encoder_outputs` (what transformers 5.17 does) must be refused, so the check is shown to bite on this stack.
Runs A use the trainer's defaults for attention and packing, so with flash-attn installed they train packed.
Ends with one SUMMARY line; exit status 0 only if every step passed. The whole check stops at `--budget-s` (570 s:
under 10 minutes on 1-8 GPUs); what has not run by then is reported as a failure.

Time plan (one launch costs the interpreter and torch start-up, the model load and, with vLLM, one engine start per
rank in parallel: about 60-90 s on a GPU machine whatever N is, since the ranks start side by side): 2 models x 2
launches + the in-process vLLM sync check (one more engine start) + the packing forward, about 6-8 minutes on 1 GPU
and on 8 GPUs alike; each launch is cut at 240 s. `--families tiny-qwen2.5-vl` halves it. The CPU rehearsal with one
model and `--steps 2` runs in the default suite inside perf/gpu_check.py's rehearsal (tests/test_gpu_check.py) on an
empty `VBENCH_ASYNC_HOME`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAMILIES = ("tiny-qwen2.5-vl", "tiny-qwen3-vl")
RUN_TIMEOUT_S = 240
DEADLINE = [float("inf")]  # time.monotonic() at which the whole check stops


def make_data(root: Path, prompts: int) -> Path:
    """`prompts` records per step cycle video, image and text, so each rank's share mixes the three."""
    import numpy as np
    from PIL import Image

    from vbench_async.demo.suite import generate_suite

    generate_suite(root / "suite", n_videos=3, questions_per_video=2, min_s=2.0, max_s=3.0, workers=2)
    media = root / "suite" / "videos"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)).save(media / "img.png")
    videos = [r for r in json.loads((root / "suite" / "annotations" / "mc.json").read_text()) if r.get("path")]
    records = []
    for i in range(max(prompts, 3)):
        kind = i % 3
        if kind == 0:
            rec = dict(videos[i % len(videos)])
        elif kind == 1:
            rec = {"problem": "Is this a photo?", "problem_type": "yes/no", "solution": "<answer>No</answer>",
                   "image_path": "img.png"}
        else:
            rec = {"problem": "Which letter comes after A?", "problem_type": "multiple choice",
                   "options": ["A. Z", "B. B", "C. Q"], "solution": "<answer>B</answer>"}
        rec["problem_id"] = f"p{i}"
        rec["offline_response"] = rec["solution"]  # a reward signal in every group
        records.append(rec)
    path = root / "train.json"
    path.write_text(json.dumps(records))
    return path


def prebuild(models: list[str]) -> dict[str, str]:
    """Resolve (and for tiny models build) every model in this one process, before any launch: the launches then
    only read finished directories. Returns model -> directory or hub id."""
    from vbench_async.models import resolve

    return {name: resolve(name).path for name in models}


def config(root: Path, records: Path, model: str, out: Path, world: int, engine: str, resume: str,
           steps: int) -> Path:
    cfg = {
        "model": model, "output_dir": str(out), "seed": 11,
        "data": {"records": str(records), "video_dir": str(root / "suite" / "videos"), "cache_dir": str(root / "cache"),
                 "frames": {"max_frames": 4, "max_pixels": 4096, "image_max_pixels": 4096}, "shuffle": False,
                 "decode_workers": 2},
        "rollout": {"engine": engine, "n": 4, "max_tokens": 8, "offline_per_group": 1, "max_model_len": 2048,
                    "vllm_gpu_memory_utilization": 0.25},
        "algorithm": {"name": "grpo"},
        "train": {"steps": steps, "prompts_per_step": 3 * world, "micro_batch_size": 12, "lr": 1e-3,
                  "gradient_checkpointing": True},
        "fsdp": {"shard": "layer", "timeout_s": 300, "peer_timeout_s": 60},
        "checkpoint": {"every": 1, "keep": 5, "export": False, "resume": resume},
        "logging": {"progress": False},
    }
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def launch(cfg: Path, world: int) -> tuple[bool, str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world),
           "-m", "vbench_async.train", "--config", str(cfg)]
    t0 = time.perf_counter()
    limit = min(RUN_TIMEOUT_S, DEADLINE[0] - time.monotonic())
    if limit < 30:
        return False, "not run: the check's time budget is spent", 0.0
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired as exc:
        return False, f"timed out after {limit:.0f} s: {str(exc.stderr)[-1500:]}", time.perf_counter() - t0
    ok = proc.returncode == 0
    return ok, "" if ok else proc.stderr[-3000:], time.perf_counter() - t0


def metrics(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def check_family(root: Path, records: Path, model: str, world: int, engine: str, steps: int) -> dict:
    from vbench_async.train.checkpoint import consolidate

    res: dict = {"model": model}
    a, b = root / f"{Path(model).name}-a", root / f"{Path(model).name}-b"  # a model directory: its name
    ok, err, res["run_a_s"] = launch(config(root, records, model, a, world, engine, "none", steps), world)
    rows = metrics(a)
    res["run_a"] = ok and [r["step"] for r in rows] == list(range(1, steps + 1)) and all(
        r["loss"] is not None and (r["grad_norm"] or 0) > 0 for r in rows)
    if not res["run_a"]:
        res["error"] = err or f"metrics: {rows}"
        return res
    res["tokens_per_s"] = sum(r["throughput/tokens_per_s"] for r in rows[1:]) / len(rows[1:])
    first = a / "checkpoints" / "step-000001"
    res["shards"] = len(list(first.glob("shard-*.safetensors")))
    ok, err, res["run_b_s"] = launch(config(root, records, model, b, world, engine, str(first), steps), world)
    res["resume"] = ok and [r["step"] for r in metrics(b)] == list(range(2, steps + 1)) and res["shards"] == world
    if not res["resume"]:
        res["error"] = err or f"metrics: {metrics(b)}, shards {res['shards']}"
        return res
    last = f"step-{steps:06d}"
    wa, wb = consolidate(a / "checkpoints" / last), consolidate(b / "checkpoints" / last)
    res["resume_max_diff"] = max((wa[k].float() - wb[k].float()).abs().max().item() for k in wa)
    return res


def check_vllm_sync(model: str) -> dict:
    """Greedy text, a perturbed sync, the original sync back: sleep (level 2) and wake around every generate."""
    import torch
    from transformers import AutoModelForImageTextToText

    from vbench_async.backends.base import Request, SamplingParams
    from vbench_async.demo.tiny_models import resolve_model
    from vbench_async.train.config import RolloutConfig
    from vbench_async.train.vllm_rollout import VLLMRollout

    path = str(resolve_model(model))  # a tiny name or a model directory
    engine = VLLMRollout(path, RolloutConfig(max_model_len=1024, vllm_gpu_memory_utilization=0.25), seed=0)
    hf = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    req = Request("q", "Which letter comes after A?", sampling=SamplingParams(temperature=1e-3, max_tokens=12, seed=0))
    try:
        first = engine.generate([req])[0][0].token_ids
        weights = {k: v.cuda() for k, v in hf.state_dict().items()}
        name = next(k for k in weights if "lm_head" in k or "embed_tokens" in k)
        perturbed = dict(weights, **{name: torch.randn_like(weights[name])})
        engine.sync(iter(perturbed.items()))
        changed = engine.generate([req])[0][0].token_ids
        engine.sync(iter(weights.items()))
        back = engine.generate([req])[0][0].token_ids
    finally:
        engine.close()
    return {"vllm_sync": changed != first and back == first, "sleep_level": engine._sleep_level}


def mixed_micro_batch(model_dir: str, pad_id: int):
    """A video, a text, a video+image and an image prompt, each answered twice, one answer empty."""
    import numpy as np
    from transformers import AutoConfig, AutoProcessor

    from vbench_async.backends.base import ImageInput, Request, VideoInput
    from vbench_async.backends.hf import HFBackend
    from vbench_async.train.policy import collate, encode

    encoder = HFBackend(model_dir)  # prompt encoding only, as the trainer does (no model loaded)
    encoder.processor = AutoProcessor.from_pretrained(model_dir)
    rng = np.random.default_rng(0)
    vision = AutoConfig.from_pretrained(model_dir).vision_config
    side = 2 * vision.patch_size * vision.spatial_merge_size  # a whole number of merged patches
    meta = dict(fps=10.0, duration=2.0, total_num_frames=20, frames_indices=[0, 6, 13, 19], width=side, height=side)
    video = VideoInput(rng.integers(0, 255, (4, side, side, 3), dtype=np.uint8), meta, "v")
    image = ImageInput(rng.integers(0, 255, (side, side, 3), dtype=np.uint8), "i")
    requests = [Request("video", "What moves?", videos=(video,)), Request("text", "Which letter comes after A?"),
                Request("both", "Describe both.", videos=(video,), images=(image,)),
                Request("image", "What is in the image?", images=(image,))]
    encoded = [encode(encoder.inputs(r)) for r in requests]
    order = (0, 0, 1, 1, 2, 2, 3, 3)
    responses = [[5, 6, 7], [8], [9, 10, 11, 12, 13], [], [14, 15], [16] * 9, [17, 18], [19]]
    return collate([encoded[i] for i in order], responses, pad_id)


def check_packing(model: str, cuda: bool) -> dict:
    """Padded vs packed log-probs of one micro-batch: on a GPU in bf16 with flash-attention 2 if installed, else
    sdpa (block-diagonal mask); in the CPU rehearsal in fp32 with sdpa."""
    import torch
    from transformers import AutoModelForImageTextToText

    from vbench_async.demo.tiny_models import resolve_model
    from vbench_async.train.policy import Policy, forward_batch

    path = str(resolve_model(model))  # a tiny name or a model directory
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    batch = mixed_micro_batch(path, pad_id=0).to(device)
    mask = batch.response_mask

    def logprobs(attention: str, packing: bool) -> torch.Tensor:
        net = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype, attn_implementation=attention)
        with torch.no_grad():
            return forward_batch(Policy(net.to(device).eval(), packing=packing), batch, 1.0)[0].float() * mask

    attention = "flash_attention_2" if cuda and importlib.util.find_spec("flash_attn") else "sdpa"
    padded, packed = logprobs(attention, False), logprobs(attention, True)
    diff = (padded - packed).abs().max().item()
    kernels = (padded - logprobs("eager", False)).abs().max().item()  # the same batch, another attention kernel
    return {"packing_attention": attention, "packing_max_diff": diff, "kernel_max_diff": kernels,
            "packing": diff <= max(kernels, 2e-2)}


def check_vision(model: str, cuda: bool) -> dict:
    """The trainer's start-up vision check on one micro-batch, and the same model made blind must fail it."""
    import torch
    from transformers import AutoModelForImageTextToText

    from vbench_async.demo.tiny_models import resolve_model
    from vbench_async.train.policy import Policy
    from vbench_async.train.vision_check import measure

    path = str(resolve_model(model))  # a tiny name or a model directory
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    batch = mixed_micro_batch(path, pad_id=0).to(device)
    net = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype).to(device).train()
    seen = measure(Policy(net), batch, probe="mixed micro-batch")
    forward = net.forward

    def blind_forward(*args, **kwargs):  # transformers 5.17: the argument accepted and ignored
        kwargs.pop("mm_encoder_outputs", None)
        return forward(*args, **kwargs)

    net.forward = blind_forward
    blind = measure(Policy(net), batch, probe="mixed micro-batch, blind forward")
    return {"vision": seen.ok and not blind.ok, "vision_logp_diff": seen.logp_diff,
            "vision_grad_nonzero": seen.grad_nonzero, "vision_blind_refused": not blind.ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, help="processes (default: every visible GPU, at most 8)")
    ap.add_argument("--cpu-dry-run", action="store_true", help="run the same steps on CPU/gloo with 2 processes")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated tiny model names or model directories")
    ap.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--budget-s", type=float, default=570.0, help="stop the whole check after this many seconds")
    ap.add_argument("--steps", type=int, default=3, help="training steps of run A (run B resumes from step 1)")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (run B resumes from step 1)")
    DEADLINE[0] = time.monotonic() + args.budget_s
    import torch

    cuda = torch.cuda.is_available() and not args.cpu_dry_run
    if not cuda and not args.cpu_dry_run:
        print("no CUDA GPU visible; use --cpu-dry-run for the CPU/gloo rehearsal")
        print("SUMMARY gpu_train_check=skipped (no CUDA GPU)")
        return 2
    world = args.gpus or (min(torch.cuda.device_count(), 8) if cuda else 2)
    vllm = cuda and importlib.util.find_spec("vllm") is not None
    engine = "vllm" if vllm else "hf"
    started = time.perf_counter()
    families = args.families.split(",")
    try:
        built = prebuild(families)
    except Exception as exc:  # nothing launched yet: say so plainly
        print(f"SUMMARY gpu_train_check=FAIL (building the models: {type(exc).__name__}: {exc})")
        return 1
    print(json.dumps({"prebuilt": built, "prebuild_s": round(time.perf_counter() - started, 1)}), flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        records = make_data(root, 3 * world)
        for model in families:
            res = check_family(root, records, model, world, engine, args.steps)
            extras = {"vllm_sync": check_vllm_sync} if vllm else {}
            extras["packing"] = lambda name: check_packing(name, cuda)
            extras["vision"] = lambda name: check_vision(name, cuda)
            for key, run in extras.items():
                try:
                    res.update(run(model))
                except Exception as exc:  # reported in the summary; the other checks still run
                    res.setdefault("error", f"{key}: {type(exc).__name__}: {exc}")
                    res[key] = False
            print(json.dumps(res), flush=True)
            results.append(res)
    passed = all(r.get("run_a") and r.get("resume") and r.get("vllm_sync", not vllm) and r.get("packing")
                 and r.get("vision") for r in results)
    figures = " ".join(
        f"{r['model']}:run_a={'ok' if r.get('run_a') else 'FAIL'},resume={'ok' if r.get('resume') else 'FAIL'},"
        f"resume_max_diff={r.get('resume_max_diff', float('nan')):.2e},tok_s={r.get('tokens_per_s', 0):.0f}"
        + (f",vllm_sleep{r.get('sleep_level')}_sync={'ok' if r.get('vllm_sync') else 'FAIL'}" if vllm else "")
        + f",packed_{r.get('packing_attention')}={'ok' if r.get('packing') else 'FAIL'}"
          f"(diff={r.get('packing_max_diff', float('nan')):.1e},kernels={r.get('kernel_max_diff', float('nan')):.1e})"
        + f",vision={'ok' if r.get('vision') else 'FAIL'}(dlogp={r.get('vision_logp_diff', float('nan')):.1e},"
          f"grad_nz={r.get('vision_grad_nonzero')},blind_refused={'yes' if r.get('vision_blind_refused') else 'NO'})"
        for r in results)
    device = f"{world}x {torch.cuda.get_device_name(0)} nccl" if cuda else f"cpu-dry-run {world}x gloo"
    print(f"SUMMARY gpu_train_check={'pass' if passed else 'FAIL'} ({device}, engine {engine}, "
          f"{time.perf_counter() - started:.0f} s) {figures}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
