"""vbench-async: asynchronous, cache-first video benchmark evaluation for Qwen-VL-family models.

The data path, one module per stage:
    record -> Sample (samples) -> frames (frames.cache) -> Request -> Backend -> Completion (backends)
    -> Score (scoring) -> Result (results.store) -> aggregate/stats (results) -> leaderboard
"""

__version__ = "0.1.0"
