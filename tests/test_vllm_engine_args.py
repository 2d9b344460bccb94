"""One builder of vLLM's engine arguments (`backends.vllm.engine_kwargs`) for the evaluation's engine and training's
colocated rollout engine: the CPU rule (a fixed KV cache, eager mode, bfloat16) is written once and both follow it.
Nothing here starts an engine or imports vLLM."""

from __future__ import annotations

from vbench_async.backends.vllm import CPU_KV_CACHE_BYTES, UNPLANNED_MAX_MODEL_LEN, VLLMSettings, engine_kwargs
from vbench_async.train.config import RolloutConfig
from vbench_async.train.vllm_rollout import rollout_engine_kwargs


def test_on_cpu_the_kv_cache_is_fixed_and_on_a_gpu_a_share_of_memory() -> None:
    cpu = engine_kwargs("m", VLLMSettings(), cpu=True)
    assert cpu["kv_cache_memory_bytes"] == CPU_KV_CACHE_BYTES and "gpu_memory_utilization" not in cpu
    assert cpu["enforce_eager"] and cpu["dtype"] == "bfloat16" and cpu["max_model_len"] == UNPLANNED_MAX_MODEL_LEN
    assert engine_kwargs("m", VLLMSettings(min_kv_cache_bytes=1 << 30), cpu=True)["kv_cache_memory_bytes"] == 1 << 30
    gpu = engine_kwargs("m", VLLMSettings(gpu_memory_utilization=0.5), cpu=False)
    assert gpu["gpu_memory_utilization"] == 0.5 and "kv_cache_memory_bytes" not in gpu
    assert not gpu["enforce_eager"] and gpu["dtype"] == "auto"
    assert engine_kwargs("m", VLLMSettings(kv_cache_bytes=1 << 28), cpu=False) == {
        **{k: v for k, v in gpu.items() if k != "gpu_memory_utilization"}, "kv_cache_memory_bytes": 1 << 28}


def test_the_rollout_engine_takes_the_evaluation_engines_arguments_plus_its_own() -> None:
    cfg = RolloutConfig(n=2, max_model_len=4096, tensor_parallel_size=2, vllm_gpu_memory_utilization=0.3)
    for cpu in (True, False):
        one = rollout_engine_kwargs("m", cfg, seed=3, world=1, prompts_per_call=4, cpu=cpu, sleep=not cpu)
        shared = engine_kwargs("m", VLLMSettings(max_model_len=4096, dtype="bfloat16", seed=3, max_images=4,
                                                 gpu_memory_utilization=0.3, max_num_seqs=8,
                                                 max_num_batched_tokens=8192), cpu)
        assert one == {**shared, "enable_sleep_mode": not cpu, "logprobs_mode": "processed_logprobs"}
        assert one["limit_mm_per_prompt"] == {"video": 1, "image": 4} and one["tensor_parallel_size"] == 1
    ranks = rollout_engine_kwargs("m", cfg, seed=3, world=4, prompts_per_call=4, cpu=False, sleep=True)
    assert ranks["distributed_executor_backend"] == "external_launcher" and ranks["tensor_parallel_size"] == 2
