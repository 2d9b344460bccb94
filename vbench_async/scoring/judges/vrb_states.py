"""VideoReasonBench's state simulator: the items without a fixed answer (dim `prediction_operation`) ask for
operations that turn the video's latent state into a target state. The judge lists the operations it reads in the
response; the moves are played on the release's recorded state and the result compared with the target named in
the question. Rules as in llyx97/video_reason_bench `utils/eval_utils.py` (`eval_op_*`, `get_next_*`), quirks
included: an invalid move on a board is skipped, a card can only be removed from the top of its pile, at most two
shell commands (`rm -rf`, `touch`) are allowed and must not share files.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

DEMOS = ("card", "chip", "cup", "file_sys", "grid", "hrd")
_ROWS = "abcde"


class TargetUnreadable(ValueError):
    """The question names no target state in the release's wording: the record, not the response, is at fault."""


def _search(pattern: str, text: str, what: str) -> re.Match:
    m = re.search(pattern, text)
    if not m:
        raise TargetUnreadable(f"the question names no {what}")
    return m


def _board(rows: int, cols: int) -> list[list[int]]:
    return [[0] * cols for _ in range(rows)]


def _source(states: Any, visible_time: str) -> Any:
    """The state the operations start from: the one the video shows (the first state when it is shown at the end,
    as the official code indexes it, else the last)."""
    return copy.deepcopy(states[0 if visible_time == "end" else -1])


# ------------------------------------------------------------------------------------------------ boards


def _hrd_target(question: str) -> list[list[int]]:
    cells = _search(r"the desired number arrangement:\s*`([^`]+)`", question, "target arrangement").group(1)
    size = _search(r"on a (\d+)x(\d+) board", question, "board size")
    rows, cols = int(size.group(1)), int(size.group(2))
    rowmap = {letter: rows - 1 - i for i, letter in enumerate(_ROWS)}  # row "a" is the bottom row
    board = _board(rows, cols)
    for cell in cells.split(", "):
        coord, num = cell.split(": ")
        r, c = coord.strip("()").split(",")
        board[rowmap[r]][int(c) - 1] = int(num)
    return board


def _hrd_step(move: str, board: list[list[int]]) -> list[list[int]]:
    """Slide a tile into the blank; "left" moves the tile right of the blank (official naming). An unknown or
    impossible move leaves the board as it was."""
    blank = next(((i, j) for i, row in enumerate(board) for j, v in enumerate(row) if v == 0), None)
    offsets = {"up": (-1, 0), "down": (1, 0), "left": (0, 1), "right": (0, -1)}
    if blank is None or move not in offsets:
        return board
    (bi, bj), (di, dj) = blank, offsets[move]
    ti, tj = bi + di, bj + dj
    if not (0 <= ti < len(board) and 0 <= tj < len(board)):
        return board
    board = copy.deepcopy(board)
    board[bi][bj], board[ti][tj] = board[ti][tj], board[bi][bj]
    return board


def play_hrd(moves: Sequence[Any], question: str, record: Mapping[str, Any]) -> bool:
    board = _source(record["states"], record["visible_time"])
    for move in moves:
        board = _hrd_step(str(move).lower(), board)
    return board == _hrd_target(question)


def _grid_target(question: str) -> list[list[int]]:
    cells = _search(r"the desired arrangement of black and white pieces:\s*`([^`]+)`", question, "target")
    size = _search(r"presents a (\d+)x(\d+) grid", question, "grid size")
    board = _board(int(size.group(1)), int(size.group(2)))
    index = {**{letter: i for i, letter in enumerate(_ROWS)}, **{str(i): i for i in range(5)}}
    for cell in cells.group(1).split(", "):
        coord, color = cell.split(": ")
        a, b = coord.strip("()").split(",")
        board[index[a]][index[b]] = 1 if color == "black" else 0
    return board


def play_grid(moves: Sequence[Any], question: str, record: Mapping[str, Any]) -> bool:
    """The red circle moves one cell per move and flips the cell it lands on and its four neighbours; a move off
    the grid is skipped. Every move must be one of left/right/up/down."""
    steps = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    moves = [str(m).lower() for m in moves]
    if not all(m in steps for m in moves):
        return False
    board = _source(record["states"], record["visible_time"])
    x, y = _source(record["coords"], record["visible_time"])
    n = len(board)
    for m in moves:
        nx, ny = x + steps[m][0], y + steps[m][1]
        if not (0 <= nx < n and 0 <= ny < n):
            continue
        x, y = nx, ny
        for dx, dy in ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)):
            if 0 <= x + dx < n and 0 <= y + dy < n:
                board[y + dy][x + dx] = 1 - board[y + dy][x + dx]
    return board == _grid_target(question)


def _cup_target(question: str) -> list[list[int]]:
    coins = _search(r"achieve the desired distribution of coins:\s*`([^`]+)`", question, "target distribution")
    size = _search(r"puzzle on a (\d+)x(\d+) board", question, "board size")
    board = _board(int(size.group(1)), int(size.group(2)))
    index = {**{letter: i for i, letter in enumerate(_ROWS)}, **{str(i + 1): i for i in range(5)}}
    for cell in coins.group(1).split(", "):
        board[index[cell[0]]][index[cell[1]]] = 1
    return board


def play_cup(moves: Sequence[Any], question: str, record: Mapping[str, Any]) -> bool:
    """Each move swaps two cups named like ("a1", "b2") (only the first two are read); a move that cannot be read
    is skipped."""
    index = {**{letter: i for i, letter in enumerate(_ROWS)}, **{str(i + 1): i for i in range(5)}}
    board = _source(record["states"], record["visible_time"])
    for move in moves:
        try:
            (r1, c1), (r2, c2) = [(index[str(p)[0]], index[str(p)[1]]) for p in list(move)[:2]]
            board[r1][c1], board[r2][c2] = board[r2][c2], board[r1][c1]
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return board == _cup_target(question)


# ------------------------------------------------------------------------------------ files, cards, chips


def _file_target(question: str) -> tuple[str, set[str]]:
    files = _search(r"contains exactly the following files:\s*`([^`]+)`", question, "target files").group(1)
    path = _search(r"to ensure that\s*`([^`]+)` contains exactly", question, "target path").group(1)
    return path, set(files.split(", "))


def play_file_sys(commands: Sequence[str], question: str, record: Mapping[str, Any]) -> bool:
    """At most two commands, each `rm -rf path/{...}` or `touch path/{...}`, on disjoint files."""
    if not commands or len(commands) > 2:
        return False
    named: dict[str, set[str]] = {"rm": set(), "touch": set()}
    for cmd in commands:
        m = re.search(r"\{([^}]+)\}", cmd)
        if not m or not (cmd.startswith("rm -rf") or cmd.startswith("touch")):
            return False
        named["rm" if cmd.startswith("rm -rf") else "touch"] = set(m.group(1).split(","))
    if named["rm"] & named["touch"]:
        return False
    path, target = _file_target(question)
    history = {f"path{i}": dict([list(record["states"][f"path{i}"].items())[0 if record["visible_time"] == "end"
                                                                             else -1]])
               for i in range(int(record["num_state"]))}
    now = {p: set(list(h.values())[-1]) for p, h in history.items()}
    for cmd in commands:
        files = set(re.search(r"\{([^}]+)\}", cmd).group(1).split(","))
        paths = re.findall(r"path\d+", cmd)
        if not paths or any(p not in now for p in paths):
            return False  # a directory the item does not have (the official code raises here)
        if cmd.startswith("rm"):
            now[paths[0]] -= files
        elif cmd.startswith("touch"):
            now[paths[0]] |= files
        for p in history:  # the official history is keyed by command text: a repeated key keeps its place
            history[p][cmd] = set(now[p])
    return path in history and list(history[path].values())[-1] == target


_SUITS = ("Hearts", "Clubs", "Diamonds", "Spades")
_RANKS = ("Ace", *(str(i) for i in range(2, 11)), "Jack", "Queen", "King")
ALL_CARDS = frozenset(f"{rank} of {suit}" for rank in _RANKS for suit in _SUITS)


def _pile_target(question: str, things: str) -> tuple[str, list[str]]:
    listed = _search(rf"contains exactly the following {things}:\s*`([^`]+)`", question, f"target {things}").group(1)
    pile = _search(r"to ensure that\s*`([^`]+)` contains exactly", question, "target pile").group(1)
    return pile, listed.split(", ")


def _piles(record: Mapping[str, Any], prefix: str) -> dict[str, list[Any]]:
    return {f"{prefix}{i}": _source(record["states"][f"{prefix}{i}"], record["visible_time"])
            for i in range(int(record["num_state"]))}


def _play_containers(moves: Sequence[Any], containers: dict[str, list[Any]], prefix: str,
                     read: Callable[[list[str]], Any], removable: Callable[[list[Any], Any], bool]) -> bool:
    """"add <thing> to <prefix>N" appends, "remove <thing> from <prefix>N" takes it out; any move of another form,
    an unreadable thing, a container the item lacks or an impossible removal makes the answer wrong."""
    for move in map(str, moves):
        words = move.split()
        if not move.startswith(("add", "remove")) or not move.endswith((f"{prefix}0", f"{prefix}1")):
            return False
        thing, name = read(words), words[-1]
        if thing is None or name not in containers:
            return False  # (for a missing cup the official code raises)
        if words[0] == "add":
            containers[name].append(thing)
        elif words[0] == "remove":
            if not removable(containers[name], thing):
                return False
            containers[name].remove(thing)
    return True


def _card(words: list[str]) -> str | None:
    card = " ".join(words[1:-2])
    return card if card in ALL_CARDS else None


def _chip(words: list[str]) -> int | None:
    ok = len(words) > 1 and words[1].isdigit() and int(words[1]) in (5, 10, 20, 50, 100)
    return int(words[1]) if ok else None


def play_card(moves: Sequence[Any], question: str, record: Mapping[str, Any]) -> bool:
    """"add <card> to pileN" puts a card on the pile's end; "remove <card> from pileN" takes only its first card."""
    pile_name, target = _pile_target(question, "cards from top to bottom")
    piles = _piles(record, "pile")
    ok = _play_containers(moves, piles, "pile", _card, lambda pile, c: bool(pile) and pile[0] == c)
    return ok and piles.get(pile_name) == target


def play_chip(moves: Sequence[Any], question: str, record: Mapping[str, Any]) -> bool:
    """"add 20 to cup0" / "remove 50 from cup0"; chips are 5, 10, 20, 50 or 100; cups compared as multisets."""
    cup_name, target = _pile_target(question, "chips")
    cups = _piles(record, "cup")
    ok = _play_containers(moves, cups, "cup", _chip, lambda cup, c: c in cup)
    return ok and cup_name in cups and Counter(cups[cup_name]) == Counter(int(c) for c in target)


PLAYERS: dict[str, Callable[[Sequence[Any], str, Mapping[str, Any]], bool]] = {
    "hrd": play_hrd, "grid": play_grid, "cup": play_cup, "file_sys": play_file_sys, "card": play_card,
    "chip": play_chip}

# What each demo needs of the release's record besides the question.
NEEDED = {"hrd": ("states", "visible_time"), "grid": ("states", "coords", "visible_time"),
          "cup": ("states", "visible_time"), "file_sys": ("states", "visible_time", "num_state"),
          "card": ("states", "visible_time", "num_state"), "chip": ("states", "visible_time", "num_state")}
