"""`data fetch`: download a benchmark's official release from the Hugging Face hub into the data root.

Annotations go to `<data root>/hub/<owner>/<name>`, where the hub source looks for them; `with_videos` also fetches
the video archives the card lists (unpacking steps are in the card's note). Network and access failures become one
`UserError` saying what to do, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .cards import Card
from .sources import data_root, hub_dir


@dataclass(frozen=True)
class FetchPlan:
    repo: str
    dest: Path
    patterns: tuple[str, ...]
    revision: str | None
    video_patterns: tuple[str, ...] = ()
    video_revision: str | None = None


def plan_fetch(card: Card, dest: Path | str | None, with_videos: bool = False) -> FetchPlan:
    hub = card.sources.hub
    if hub is None:
        raise UserError(f"benchmark {card.id!r} has no hub release in its card; get its unified annotation file "
                        f"({card.sources.unified.annotation if card.sources.unified else 'see the card'}) instead")
    videos = hub.video_files if with_videos else ()
    return FetchPlan(hub.repo, hub_dir(card, data_root(dest)), tuple(f.glob for f in hub.files), hub.revision,
                     videos, hub.video_revision)


def _download(repo: str, dest: Path, patterns: tuple[str, ...], revision: str | None) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        snapshot_download(repo_id=repo, repo_type="dataset", local_dir=str(dest), allow_patterns=list(patterns),
                          revision=revision)
    except GatedRepoError as exc:
        raise UserError(f"{repo} is gated: accept its terms on https://huggingface.co/datasets/{repo} and set "
                        f"HF_TOKEN (or run `huggingface-cli login`), then retry") from exc
    except RepositoryNotFoundError as exc:
        raise UserError(f"dataset {repo} was not found on the hub (or needs a token): {exc}") from exc
    except LocalEntryNotFoundError as exc:
        raise UserError(f"cannot download {repo}: the hub is unreachable or offline mode is on (HF_HUB_OFFLINE). "
                        f"Download it elsewhere and copy it to {dest}") from exc
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise UserError(f"cannot download {repo} ({type(exc).__name__}: {str(exc)[:200]}); check the network, or "
                        f"copy the release to {dest}") from exc
    except Exception as exc:  # httpx/requests connection errors differ between huggingface_hub versions
        if "connect" in type(exc).__name__.lower() or "timeout" in type(exc).__name__.lower():
            raise UserError(f"cannot reach the hub to download {repo} ({type(exc).__name__}); check the network, "
                            f"or copy the release to {dest}") from exc
        raise


def fetch(plan: FetchPlan) -> Path:
    plan.dest.mkdir(parents=True, exist_ok=True)
    _download(plan.repo, plan.dest, plan.patterns, plan.revision)
    if plan.video_patterns:
        _download(plan.repo, plan.dest, plan.video_patterns, plan.video_revision or plan.revision)
    return plan.dest
