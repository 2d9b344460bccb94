"""Code answers (Python, SVG, HTML): static checks only. Model output is never executed, imported or rendered.

- Python: the code must parse (`ast.parse`, which compiles nothing and runs nothing). Value = 0.5 x recall of the
  ground truth's defined/imported names (all its identifiers if it defines none) + 0.5 x token-sequence similarity.
- SVG / HTML: an `<svg>...</svg>` element / at least one tag must be present. Value = 0.7 x recall of the ground
  truth's tag names + 0.3 x length ratio (whitespace removed), as the predecessor.
"""

from __future__ import annotations

import ast
import difflib
import re

from ..samples import Sample
from .base import Score, malformed
from .tasks import first_answer, ground_truth

_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.S)
_SVG_OPEN = re.compile(r"<svg\b", re.I)
_SVG_CLOSE = re.compile(r"</svg\s*>", re.I)
_TAG = re.compile(r"<([a-zA-Z][\w:-]*)[^<>]*>")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_MAX_TOKENS = 4000


def code_language(sample: Sample) -> str:
    """ "svg", "html" or "python", from the raw task type ("svg-code", "html-code") or the ground truth's shape."""
    raw = sample.task_type.lower()
    for lang in ("svg", "html"):
        if lang in raw:
            return lang
    gt = sample.answer.lower()
    if "<svg" in gt:
        return "svg"
    return "html" if re.search(r"<(html|body|div|!doctype)\b", gt) else "python"


def _block(text: str) -> str:
    fences = _FENCE.findall(text)
    return (fences[-1] if fences else text).strip()


def _python_tree(code: str) -> ast.AST | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _parser(lang: str):
    def parse(text: str, whole: bool) -> str | None:
        code = _block(text)
        if lang == "python":
            tree = _python_tree(code) if code else None
            # comments, "...", or a lone literal parse too, but name nothing: not code
            return code if tree is not None and (_defined_names(tree) or _identifiers(tree)) else None
        if lang == "svg":  # from the first <svg to the last </svg>
            start, ends = _SVG_OPEN.search(code), list(_SVG_CLOSE.finditer(code))
            if start is None or not ends or ends[-1].start() < start.start():
                return None
            return code[start.start() : ends[-1].end()]
        return code if _TAG.search(code) else None

    return parse


def _defined_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _identifiers(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }


def _similarity(a: str, b: str) -> float:
    ta, tb = _TOKEN.findall(a)[:_MAX_TOKENS], _TOKEN.findall(b)[:_MAX_TOKENS]
    return difflib.SequenceMatcher(None, ta, tb).ratio() if (ta or tb) else 1.0


def score_code(sample: Sample, output: str) -> Score:
    lang = code_language(sample)
    parse = _parser(lang)
    gt = ground_truth(sample, parse, f"{lang} code")
    found = first_answer(output, parse)
    if found is None:
        return malformed(source=None, language=lang)
    code, cand = found
    details = {"source": cand.source, "language": lang}
    if lang == "python":
        gt_tree, pred_tree = ast.parse(gt), ast.parse(code)
        names = _defined_names if _defined_names(gt_tree) else _identifiers
        gt_names, pred_names = names(gt_tree), names(pred_tree)
        recall = len(gt_names & pred_names) / len(gt_names) if gt_names else 1.0
        similarity = _similarity(code, gt)
        value = 0.5 * recall + 0.5 * similarity
        details.update(name_recall=recall, similarity=similarity)
    else:
        gt_tags = {t.lower() for t in _TAG.findall(gt)}
        pred_tags = {t.lower() for t in _TAG.findall(code)}
        recall = len(gt_tags & pred_tags) / len(gt_tags) if gt_tags else 1.0
        lp, lg = len("".join(code.split())), len("".join(gt.split()))
        length_ratio = min(lp, lg) / max(lp, lg) if max(lp, lg) else 1.0
        value = 0.7 * recall + 0.3 * length_ratio
        details.update(tag_recall=recall, length_ratio=length_ratio)
    return Score(min(1.0, value), code, True, details)
