"""The errors every layer raises: the CLI turns each kind into its exit code (`vbench_async/cli/__init__.py`)."""


class UserError(Exception):
    """A mistake in the user's input (unknown name, missing path, bad option). Message must say what to do."""


class DataMissing(UserError):
    """A benchmark's annotations are not under the data root: a suite runs the others and says which were not run."""


class NoData(UserError):
    """No benchmark of the selection has its data: one message for all of them (the CLI adds which flag to set)."""

    def __init__(self, message: str, root: str, not_run: dict[str, str]):
        super().__init__(message)
        self.root = root  # the data root that was searched, absolute
        self.not_run = not_run  # benchmark -> why (each one's own message, for the log)


class SampleError(Exception):
    """A per-sample failure (bad video, malformed record, engine error). Recorded as a result, never dropped.

    `kind` is a short stable label used in summaries, a `failure_kinds.FailureKind` (the one table of kinds: the name
    written to disk, final or transient, the user's hint); the message explains the cause.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.sample_id: str | None = None  # set when the failure belongs to a record without a parsed Sample


class EngineDead(RuntimeError):
    """The engine is gone (crashed process, lost server): stop the run, keep what finished."""
