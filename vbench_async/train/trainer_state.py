"""A checkpoint's JSON files as declared records (`checkpoint.py` writes and reads them): trainer_state.json (the
step, the prompts consumed, the configuration and its hash, the world size and the base model; `resume_identity.py`
checks it) and optimizer.json (the optimizer's param groups); and an export's vbench_train.json (what it was trained
from). How they are read and written: `record_io.py` (keys they do not declare are kept; an older file lacks
later fields).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..record_io import OutputRecord, always, read_record

STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.json"
EXPORT_FILE = "vbench_train.json"  # in an exported model directory (the leaderboard's recipe column reads it)
FORMAT = "dcp-safetensors-1"


@dataclass
class TrainerState(OutputRecord):
    """Fields in the order the trainer writes them; `format` last (`save_checkpoint` sets it)."""

    step: int = always(0)
    consumed: int = always(0)  # prompts the data order has handed out
    config_hash: str | None = None
    config: dict[str, Any] | None = None  # TrainConfig.to_dict(); absent in checkpoints older than it
    world_size: int | None = None
    model: str | None = None  # the base model, as the config names it
    format: str | None = None  # absent: a checkpoint of the full-safetensors format before FORMAT


def read_state(path: Path) -> TrainerState:
    """The trainer state of the checkpoint directory `path`; UserError when it is none, is damaged or of an older
    format."""
    if not (path / STATE_FILE).is_file():
        raise UserError(f"{path} is not a training checkpoint (no {STATE_FILE})")
    state = read_record(TrainerState, path / STATE_FILE)
    if state.format != FORMAT:
        raise UserError(f"{path} is a checkpoint of an older format ({state.format or 'full safetensors'}); "
                        "resume from a newer one or start with checkpoint.resume: none")
    return state


@dataclass
class OptimizerGroups(OutputRecord):
    """optimizer.json: the param groups of `get_optimizer_state_dict` (lr, betas, weight decay, the parameters' names:
    torch's keys, kept as they are)."""

    param_groups: list[dict[str, Any]] = always(default_factory=list)

    @classmethod
    def read(cls, checkpoint: Path) -> list[dict[str, Any]]:
        """The param groups of the checkpoint directory `checkpoint`; RecordError when the file is damaged."""
        return read_record(cls, checkpoint / OPTIMIZER_FILE).param_groups


@dataclass
class ExportInfo(OutputRecord):
    """vbench_train.json: the step an export holds, the configuration's hash and the base model; an export of a
    checkpoint directory names it too."""

    step: int = always(0)
    config_hash: str | None = always()
    base_model: str | None = always()
    checkpoint: str | None = None
