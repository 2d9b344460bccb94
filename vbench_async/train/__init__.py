"""RL training add-on: GRPO-family algorithms on FSDP2, launched with torchrun, on the evaluation's data path.

    torchrun --nproc_per_node N -m vbench_async.train --config CONFIG.yaml [--set key=value ...]
    vbench-async train --config CONFIG.yaml --nproc-per-node N          (the same, as a thin wrapper)

Modules: config (TrainConfig, YAML), data (records -> items, order, media), rollout / vllm_rollout (engines,
groups, rewards, offline mixing), algos (advantages, losses), policy (forward with the single vision pass),
fsdp (process group, sharding), trainer (the loop), checkpoint (resume, export), logger, validation
(held-out validation on every rank's rollout engine, through engine_backend).
See docs/training.md.
"""
