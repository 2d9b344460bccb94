"""`vbench-async judge`: LLM-as-judge pass over the open-ended answers of a run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="LLM-as-judge pass for open-ended answers of a run",
        description=(
            "Judge the open-ended answers of RUN_DIR (result lines marked needs_judge, scored offline by ROUGE-L) "
            "with a judge model: it sees the question, the reference answer and the model's answer and says CORRECT "
            "or INCORRECT. Verdicts are appended to RUN_DIR/judge/*.jsonl, pinned by judge model fingerprint and "
            "prompt hash; re-running skips items already judged by the same judge. An unparsable verdict is recorded "
            "as a judge failure (the item keeps its offline score). summary.json is then recomputed."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="result directory written by `vbench-async run`")
    p.add_argument("--judge-model", required=True,
                   help="judge model: a model directory, hub id or tiny-* model (vllm, hf), or the served model name "
                        "(openai)")
    p.add_argument("--backend", default="vllm", choices=["vllm", "openai", "hf"],
                   help="where the judge runs: in-process vLLM, an OpenAI-compatible server, or transformers")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens per verdict (raise it for reasoning judges)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (decoding is greedy)")
    p.add_argument("--concurrency", type=int, default=8, help="judge requests in flight")
    p.add_argument("--retry-failed", action="store_true", help="judge again the items whose verdict was unparsable")
    p.add_argument("--no-site", action="store_true", help="do not rebuild RUN_DIR/leaderboard")
    eng = p.add_argument_group("vLLM engine (backend vllm)")
    eng.add_argument("--max-model-len", type=int, default=4096, help="context length the engine reserves")
    eng.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="share of GPU memory vLLM may use")
    eng.add_argument("--kv-cache-bytes", type=int, help="explicit KV cache size in bytes (default on CPU: 64 MiB)")
    eng.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs for the judge engine")
    eng.add_argument("--dtype", default="auto", help="weights dtype")
    srv = p.add_argument_group("openai backend")
    srv.add_argument("--base-url", help="server URL, e.g. http://127.0.0.1:8000/v1")
    srv.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY or none)")
    srv.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    p.set_defaults(func=main)


def backend_options(args: argparse.Namespace) -> dict:
    if args.backend == "vllm":
        return dict(max_model_len=args.max_model_len, gpu_memory_utilization=args.gpu_memory_utilization,
                    kv_cache_bytes=args.kv_cache_bytes, tensor_parallel_size=args.tensor_parallel_size,
                    dtype=args.dtype, max_num_seqs=max(1, args.concurrency))
    if args.backend == "openai":
        if not args.base_url:
            raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        return dict(base_url=args.base_url, api_key=args.api_key, timeout_s=args.request_timeout)
    return {}


def main(args: argparse.Namespace) -> int:
    from ..judge import JudgeConfig, judge_run_dir
    from ..results.summaries import print_table

    cfg = JudgeConfig(model=args.judge_model, backend=args.backend, backend_options=backend_options(args),
                      max_tokens=args.max_tokens, seed=args.seed, concurrency=args.concurrency,
                      retry_failed=args.retry_failed, rebuild_site=not args.no_site)
    try:
        summary = judge_run_dir(args.run_dir, cfg)
    except Exception as exc:
        from ..backends.base import EngineDead

        if isinstance(exc, EngineDead):
            print(f"vbench-async: the judge engine stopped: {exc}\nVerdicts so far are kept; re-run the same command "
                  "to resume.", file=sys.stderr)
            return 3
        raise
    jp = summary["judge_pass"]
    print(f"judge {jp['judge_id']}: {jp['n_judged']} judged, {jp['n_judge_failed']} judge failure(s), "
          f"{jp['n_skipped']} already judged")
    print()
    print_table(summary)
    return 0
