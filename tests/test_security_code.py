"""No code execution from data: the code never deserialises with pickle, never runs what a record or a model wrote,
and renders every template from files, never from data. That covers the training ranks too: torch.distributed's
object collectives (`all_gather_object`, `send_object_list`, ...) pickle what they carry, so the ranks exchange
tensors only (train/wire.py for whole groups), and nothing is written with torch.save (safetensors/JSON only).

A static scan of every Python file of the project (package, tests, perf scripts) with the `ast` module, plus
behaviour checks: hostile model outputs through every scorer, hostile questions through every prompt template.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.hostile import JINJA

from vbench_async.samples import Sample

REPO = Path(__file__).resolve().parents[1]
SCANNED = [p for folder in ("vbench_async", "tests", "perf", "scripts") for p in sorted((REPO / folder).rglob("*.py"))]

# Modules whose loaders run code found in the data they read.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib", "pickletools"}
UNSAFE_CALLS = {  # dotted call name -> why
    "eval": "eval() runs a string as Python",
    "exec": "exec() runs a string as Python",
    "compile": "compile() turns a string into code",
    "os.system": "a shell command line",
    "os.popen": "a shell command line",
    "yaml.unsafe_load": "constructs arbitrary Python objects",
    "yaml.full_load": "constructs Python objects",
    "pd.read_pickle": "unpickles",
    "pandas.read_pickle": "unpickles",
    "torch.save": "pickles (safetensors or JSON instead)",
    "jinja2.Template": "a template built from a string (data) instead of a file",
}
UNSAFE_METHODS = {"from_string": "a jinja2 template built from a string (data) instead of a file",
                  "read_pickle": "unpickles"}
# torch.distributed's collectives of Python objects: each pickles on one rank and unpickles on another.
OBJECT_COLLECTIVES = {"all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                      "send_object_list", "recv_object_list", "all_to_all_object", "broadcast_object"}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.why}"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def scan(source: str, file: str) -> list[Finding]:
    """Unsafe deserialisation and code execution in one Python source."""
    found: list[Finding] = []
    for node in ast.walk(ast.parse(source, filename=file)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [Finding(file, line, f"imports {a.name}") for a in node.names
                      if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(Finding(file, line, f"imports from {node.module}"))
        elif isinstance(node, ast.ImportFrom):
            found += [Finding(file, line, f"imports {a.name}: an object collective pickles") for a in node.names
                      if a.name in OBJECT_COLLECTIVES]
        elif isinstance(node, ast.Attribute) and (node.attr in OBJECT_COLLECTIVES or (  # called or passed around
                "_object" in node.attr and _dotted(node.value) in ("dist", "torch.distributed", "c10d"))):
            found.append(Finding(file, line, f"{_dotted(node)}: an object collective pickles"))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            method = name.rsplit(".", 1)[-1]
            if name in OBJECT_COLLECTIVES:  # imported under its own name
                found.append(Finding(file, line, f"{name}: an object collective pickles"))
            elif name in UNSAFE_CALLS:
                found.append(Finding(file, line, f"{name}: {UNSAFE_CALLS[name]}"))
            elif "." in name and method in UNSAFE_METHODS:
                found.append(Finding(file, line, f"{name}: {UNSAFE_METHODS[method]}"))
            elif name == "torch.load" or name.endswith(".torch.load"):
                if not _is_true(_keyword(node, "weights_only")):
                    found.append(Finding(file, line, "torch.load without weights_only=True unpickles"))
            elif name in ("yaml.load", "yaml.load_all"):
                loader = _dotted(_keyword(node, "Loader") or (node.args[1] if len(node.args) > 1 else ast.Name("")))
                if not loader.endswith(("SafeLoader", "CSafeLoader", "BaseLoader")):
                    found.append(Finding(file, line, f"{name} with Loader={loader or 'default'}"))
            elif name.endswith(("np.load", "numpy.load")) and _is_true(_keyword(node, "allow_pickle")):
                found.append(Finding(file, line, "numpy.load(allow_pickle=True) unpickles"))
            elif _is_true(_keyword(node, "shell")):
                found.append(Finding(file, line, f"{name}(shell=True): a shell command line"))
            elif _is_true(_keyword(node, "trust_remote_code")):
                found.append(Finding(file, line, f"{name}(trust_remote_code=True) runs code from a model repository"))
    return found


def test_the_scan_finds_what_it_looks_for():
    bad = """
import pickle
from dill import loads
import torch, yaml, numpy as np, subprocess, jinja2
torch.load("x.pt")
torch.load("x.pt", weights_only=False)
yaml.load(text)
np.load("a.npy", allow_pickle=True)
eval(model_output)
exec(code)
subprocess.run(cmd, shell=True)
jinja2.Template(record["problem"])
env.from_string(question)
AutoModel.from_pretrained(path, trust_remote_code=True)
dist.all_gather_object(out, costs)
torch.distributed.send_object_list([groups], dst=1)
from torch.distributed import recv_object_list
recv_object_list(box, src=0)
send = dist.broadcast_object_list
dist.some_future_object_collective(x)
torch.save(state, "x.pt")
"""
    good = """
import json, ast, yaml, torch, numpy as np, re
torch.load("x.pt", weights_only=True)
yaml.safe_load(text)
yaml.load(text, Loader=yaml.SafeLoader)
np.load("a.npy")
ast.literal_eval(options)
re.compile(pattern)
model.eval()
subprocess.run([sys.executable, "-m", "x"])
dist.all_gather(out, tensor)
dist.send(tensor, dst=1)
safetensors.torch.save(tensors)
"""
    assert {f.line for f in scan(bad, "bad.py")} == set(range(2, 22)) - {4}  # every line but the plain import
    assert scan(good, "good.py") == []


def test_no_pickle_no_eval_no_unsafe_loaders_anywhere():
    assert len(SCANNED) > 100
    findings = [f for path in SCANNED for f in scan(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert not findings, "\n".join(map(str, findings))


PAYLOADS = [
    "__import__('os').system('touch {marker}')",
    "```python\nimport os\nos.system('touch {marker}')\n```",
    "<answer>__import__('os').system('touch {marker}')</answer>",
    "The final answer is $\\input{{{marker}}}$ and 1+__import__('os').system('touch {marker}')",
    "{{{{ ''.__class__.__mro__[1].__subclasses__() }}}} {{% import os %}}{{{{ os.system('touch {marker}') }}}}",
    "<answer>[__import__('os').system('touch {marker}')]</answer>",
    "<svg onload=\"fetch('{marker}')\"></svg><script>require('child_process').exec('touch {marker}')</script>",
]


@pytest.mark.parametrize("task_type", ["multiple choice", "numerical", "regression", "counting", "boolean",
                                       "temporal grounding", "spatial grounding", "spatial-temporal grounding",
                                       "tracking", "ocr", "math", "open-ended", "code", "html-code", "svg-code",
                                       "preference"])
def test_model_output_is_never_executed_by_a_scorer(task_type, tmp_path):
    from vbench_async.scoring import reward, score

    marker = tmp_path / "pwned"
    answers = {"multiple choice": "A", "boolean": "yes", "temporal grounding": "[1.0, 2.0]",
               "spatial grounding": '{"boxes": [1, 2, 3, 4]}',
               "spatial-temporal grounding": '{"time": [0.0, 2.0], "boxes": {"1": [1, 2, 3, 4]}}',
               "tracking": '{"boxes": {"0": [1, 2, 3, 4]}}', "code": "def f():\n    return 1",
               "html-code": "<div>x</div>", "svg-code": "<svg><rect/></svg>", "preference": "A"}
    sample = Sample("b", "1", task_type, "q?", f"<answer>{answers.get(task_type, '3')}</answer>",
                    options=("A. x", "B. y") if task_type == "multiple choice" else ())
    for payload in PAYLOADS:
        text = payload.format(marker=marker)
        result = score(sample, text)
        assert 0.0 <= result.value <= 1.0
        reward(sample, text)
    assert not marker.exists(), f"a {task_type} scorer executed model output"


def test_hostile_questions_render_literally_in_every_prompt_template():
    from vbench_async.benchmarks import prompts

    sample = Sample("b", "1", "multiple choice", JINJA, "<answer>A</answer>", options=(f"A. {JINJA}", "B. b"),
                    fields={"subject": JINJA})
    for name in prompts.template_names():
        text = prompts.render(name, sample)
        assert JINJA in text, name
        assert "LOOPLOOP" not in text and "49" not in text, name


def test_the_site_escapes_and_prompts_do_not():
    """HTML pages autoescape everything; prompts are plain text (escaping would change what the model reads)."""
    from vbench_async.benchmarks.prompts import environment as prompt_env
    from vbench_async.leaderboard.site import environment as site_env

    assert site_env().autoescape is True
    assert prompt_env().autoescape is False
