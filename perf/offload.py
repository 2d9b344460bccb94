"""What `fsdp.offload_rollout` costs, measured on CPU, and what it frees at 8 B on 8 x H200, computed.

    PYTHONPATH=. .venv/bin/python perf/offload.py [--hidden 384] [--layers 4] [--tokens 128] [--steps 4] [--threads 1]

Measured: a Qwen2-architecture text model (random weights, fp32; ~13 M parameters at the defaults) sharded by the
trainer's own `shard` (a world of one on gloo) and trained with AdamW as the trainer builds it; each step is a forward
and backward on 2 x `--tokens` tokens and an optimizer step, then the training state goes to host memory and back
(`train/offload.py`, as around every rollout) and the parameters and Adam state are checked bit-identical. Reported:
bytes moved each way, the two copy times (medians of steps 2..N) and their ratio to the training step. On CPU "host
memory" is the same DRAM, so the copy rate is a memcpy's, not PCIe's: the GPU figure below is computed from the bytes.

Computed: Qwen3-VL-8B's parameter count (its architecture built on the meta device, no weights) and, FSDP over the
8 ranks of one H200 node, the bytes per rank that offload moves (fp32 parameter shard + two fp32 Adam moments) and
frees (those plus the fp32 gradient shard, dropped instead of copied), the copy time over PCIe, and what the freed
memory holds as vLLM KV cache (bf16, per token: 2 x layers x KV heads x head dim x 2 bytes). Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from vbench_async.train.config import FSDPConfig  # noqa: E402
from vbench_async.train.fsdp import close_distributed, init_distributed, shard  # noqa: E402
from vbench_async.train.offload import HostOffload, OffloadStats  # noqa: E402

H200_BYTES = 141e9  # HBM3e per GPU
PCIE_BPS = 25e9  # per GPU, each way: Gen5 x16 (~55 GB/s achieved pinned) shared by two GPUs on an HGX board's switch
RANKS = 8
VOCAB = 8192


class Wrapped(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, labels=ids).loss


def measure(hidden: int, layers: int, tokens: int, steps: int) -> dict[str, float]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    info = init_distributed(FSDPConfig())
    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=layers,
                         num_attention_heads=hidden // 64, num_key_value_heads=max(1, hidden // 256),
                         vocab_size=VOCAB, tie_word_embeddings=False)
    policy = shard(Wrapped(Qwen2ForCausalLM(config)), FSDPConfig(shard="root"), info, False)
    optim = torch.optim.AdamW(policy.parameters(), lr=1e-5, foreach=True)
    moved = HostOffload([policy], optim, info.device)
    data = torch.Generator().manual_seed(1)
    step_s, offload_s, reload_s, identical = [], [], [], True
    for _ in range(steps):
        started = time.perf_counter()
        optim.zero_grad(set_to_none=True)
        policy(torch.randint(0, VOCAB, (2, tokens), generator=data)).backward()
        optim.step()
        step_s.append(time.perf_counter() - started)
        before = [t.to_local().clone() for t in policy.parameters()] + [
            v.to_local().clone() for s in optim.state.values() for k, v in s.items() if k != "step"]
        stats = OffloadStats()
        moved.offload(stats)
        moved.reload(stats)
        after = [t.to_local() for t in policy.parameters()] + [
            v.to_local() for s in optim.state.values() for k, v in s.items() if k != "step"]
        identical &= all(torch.equal(a, b) for a, b in zip(before, after))
        offload_s.append(stats.offload_s)
        reload_s.append(stats.reload_s)
    params = sum(p.numel() for p in policy.parameters())
    close_distributed()
    later = slice(1, None)  # step 1 pays one-off costs (allocations, Adam state creation)
    return {"params": params, "bytes": stats.bytes, "step_s": statistics.median(step_s[later]),
            "offload_s": statistics.median(offload_s[later]), "reload_s": statistics.median(reload_s[later]),
            "identical": identical}


def qwen3_vl_8b() -> dict[str, float]:
    """Parameter count and KV bytes per token of Qwen3-VL-8B (its published architecture)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    text = dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=151936)
    vision = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                  deepstack_visual_indexes=[8, 16, 24])
    config = Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    with torch.device("meta"):
        model = Qwen3VLForConditionalGeneration(config)
    params = sum(p.numel() for p in model.parameters())
    kv_per_token = 2 * text["num_hidden_layers"] * text["num_key_value_heads"] * text["head_dim"] * 2
    per_rank = params / RANKS
    moved = per_rank * 4 * 3  # fp32 parameter shard + exp_avg + exp_avg_sq
    freed = moved + per_rank * 4  # + the fp32 gradient shard, dropped
    return {"params": params, "moved": moved, "freed": freed, "kv_per_token": kv_per_token,
            "copy_s": moved / PCIE_BPS, "tokens": freed / kv_per_token, "share": freed / H200_BYTES,
            "host": moved * RANKS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    # One thread by default: on a machine shared with other jobs, every parallel region of a multi-threaded copy
    # waits at its barrier for a descheduled thread (150 MB in 204 tensors took 5 s at 2 threads, 0.06 s at 1).
    torch.set_num_threads(args.threads)
    m = measure(args.hidden, args.layers, args.tokens, args.steps)
    copies = m["offload_s"] + m["reload_s"]
    ratio = copies / m["step_s"]
    print(f"CPU: {m['params'] / 1e6:.1f} M parameters, {m['bytes'] / 1e6:.0f} MB moved each way per offload; "
          f"train step {m['step_s']:.3f} s, offload {m['offload_s']:.3f} s + reload {m['reload_s']:.3f} s "
          f"({m['bytes'] / copies * 2 / 1e9:.2f} GB/s), {ratio:.3f}x the step; bit-identical: {m['identical']}")
    g = qwen3_vl_8b()
    print(f"Qwen3-VL-8B on {RANKS} x H200 (computed): {g['params'] / 1e9:.2f} B parameters; per rank "
          f"{g['moved'] / 1e9:.1f} GB moved each way (fp32 shard + 2 Adam moments), {g['freed'] / 1e9:.1f} GB freed "
          f"(+ the fp32 gradient shard) = {g['share'] * 100:.1f}% of an H200, {g['tokens'] / 1e3:.0f}k more KV-cache "
          f"tokens at {g['kv_per_token'] / 1024:.0f} KiB/token; {g['copy_s']:.2f} s each way at "
          f"{PCIE_BPS / 1e9:.0f} GB/s; {g['host'] / 1e9:.0f} GB of pinned host memory per node")
    print(f"SUMMARY offload cpu_params_M={m['params'] / 1e6:.1f} cpu_bytes_MB={m['bytes'] / 1e6:.0f} "
          f"cpu_step_s={m['step_s']:.3f} cpu_copies_s={copies:.3f} cpu_ratio={ratio:.3f} "
          f"identical={m['identical']} h200_8b_freed_GB_per_rank={g['freed'] / 1e9:.1f} "
          f"h200_8b_copy_s_each_way={g['copy_s']:.2f} h200_8b_kv_tokens_k={g['tokens'] / 1e3:.0f}")


if __name__ == "__main__":
    main()
