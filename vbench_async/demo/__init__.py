"""Built-in demo material: tiny random-weight Qwen-VL checkpoints and a synthetic video suite with exact answers.

Both are generated on first use into the vbench-async home (`$VBENCH_ASYNC_HOME`, default ~/.cache/vbench-async),
so a fresh machine can run the whole evaluation path with no downloads.
"""
