"""The static hazard scan: every planted hazard found where its comment says, nothing in clean code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reprobox.errors import UsageError
from reprobox.hazards import COVERED_BY_REPROBOX, RULES, Finding, scan_source, scan_tree

JOBS = Path(__file__).resolve().parents[1] / "jobs"
HAZARD_COMMENT = re.compile(r"#\s*hazard:\s*(?P<rules>[\w\s,-]+)$")


def planted(tree: Path) -> set[tuple[str, int, str]]:
    """(path, line, rule) for every `# hazard: rule[, rule]` comment under `tree`."""
    expected = set()
    for path in sorted(tree.rglob("*.py")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            match = HAZARD_COMMENT.search(text)
            if match:
                for rule in match.group("rules").split(","):
                    expected.add((path.relative_to(tree).as_posix(), number, rule.strip()))
    return expected


def rules_in(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in scan_source(source, "job.py")]


# --- the fixture trees ------------------------------------------------------------------------------


# Fixture trees with planted hazards: torch and Python (hazards), libraries and patterns beyond torch
# (audit-beyond-torch), and tokenizers' own train_bert_wordpiece.py example (audit-bert-wordpiece).
PLANTED_TREES = {"hazards": 40, "audit-beyond-torch": 35, "audit-bert-wordpiece": 2}


@pytest.mark.parametrize(("name", "at_least"), PLANTED_TREES.items())
def test_every_planted_hazard_is_found_and_nothing_else(name: str, at_least: int) -> None:
    tree = JOBS / name
    expected = planted(tree)
    assert len(expected) >= at_least  # the fixture really is planted
    found = {(f.path, f.line, f.rule) for f in scan_tree(tree)}
    assert sorted(found - expected) == [], "findings without a hazard comment"
    assert sorted(expected - found) == [], "planted hazards not found"


def test_the_fixtures_plant_every_rule_that_code_can_trigger() -> None:
    planted_rules = {rule for name in PLANTED_TREES for _, _, rule in planted(JOBS / name)}
    assert planted_rules == set(RULES) - {"syntax-error", "unreadable-file"}


def test_clean_job_has_no_findings() -> None:
    assert scan_tree(JOBS / "clean") == []


def test_findings_are_sorted_relative_posix_paths_with_one_based_columns() -> None:
    findings = scan_tree(JOBS / "hazards")
    assert findings == sorted(findings, key=lambda f: (f.path, f.line, f.column, f.rule))
    assert {f.path for f in findings} == {"attention.py", "data/vocab.py", "model.py", "train.py"}
    first = next(f for f in findings if f.path == "train.py" and f.rule == "cudnn-benchmark")
    assert first.column == 5  # `    cudnn.benchmark = True`


@pytest.mark.slow
def test_clean_job_is_reproducible_once_seeded(tmp_path: Path) -> None:
    """The clean fixture really is clean: two seeded runs with worker processes give equal weights."""
    torch = pytest.importorskip("torch")
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "sitecustomize.py").write_text(
        "import random, numpy, torch\n"
        "random.seed(0); numpy.random.seed(0); torch.manual_seed(0)\n"
        "torch.use_deterministic_algorithms(True)\n"
    )
    runs = []
    for name in ("a", "b"):
        env = {**os.environ, "PYTHONPATH": str(boot), "REPROBOX_OUTPUT_DIR": str(tmp_path / name)}
        command = [sys.executable, "train.py", "--epochs", "1", "--samples", "64"]
        runs.append(subprocess.Popen(command, cwd=JOBS / "clean", env=env, stdout=subprocess.DEVNULL))
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    first, second = (torch.load(tmp_path / name / "model.pt", weights_only=True) for name in ("a", "b"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)


# --- individual rules -------------------------------------------------------------------------------


def test_aliases_are_resolved() -> None:
    source = """
import torch.nn.functional as Fn
from torch import nn as tnn
from torch.utils.data import DataLoader as Loader
from torch.nn.functional import interpolate as resize

a = Fn.ctc_loss(x, y, il, tl)
b = tnn.EmbeddingBag(3, 4)
c = Loader(ds, num_workers=4)
d = resize(x, scale_factor=2, mode="bilinear")
"""
    assert rules_in(source) == [
        (7, "ctc-loss"),
        (8, "embedding-bag"),
        (9, "dataloader-unseeded-workers"),
        (10, "interpolate"),
    ]


def test_same_names_from_other_libraries_are_not_flagged() -> None:
    source = """
import numpy as np
import re
from mylib import DataLoader, interpolate

counts = np.bincount(x, weights=w)
pattern = re.compile("a+")
loader = DataLoader(ds, num_workers=4)
image = interpolate(x, mode="bilinear")
def ctc_loss(a, b): return a
loss = ctc_loss(1, 2)
"""
    assert rules_in(source) == []


def test_tensor_methods_match_on_any_receiver() -> None:
    source = """
import torch
self.buffer.index_add_(0, i, v)
torch.zeros(3).scatter_add_(0, i, v)
values[0].bincount(weights)
values.bincount()
x.index_put_((i,), v, accumulate=False)
x.index_put_((i,), v, flag)
"""
    assert rules_in(source) == [
        (3, "index-add"),
        (4, "scatter-add"),
        (5, "bincount"),
        (8, "index-put-accumulate"),
    ]


def test_interpolate_modes() -> None:
    source = """
import torch.nn.functional as F
from torch import nn
F.interpolate(x, scale_factor=2)
F.interpolate(x, scale_factor=2, mode="nearest")
F.interpolate(x, scale_factor=2, mode=chosen)
F.interpolate(x, scale_factor=2, mode="linear")
nn.Upsample(None, 2, "bicubic")
F.upsample_bilinear(x, scale_factor=2)
"""
    findings = scan_source(source, "up.py")
    assert [(f.line, f.rule) for f in findings] == [
        (7, "interpolate"),
        (8, "interpolate"),
        (9, "interpolate"),
    ]
    assert "repeat_interleave" in findings[0].fix and "nearest" in findings[0].fix
    assert "mode='linear'" in findings[0].message and "backward" in findings[0].message


@pytest.mark.parametrize(
    ("call", "flagged"),
    [
        ("DataLoader(ds, num_workers=2)", True),
        ("DataLoader(ds, num_workers=n, generator=g, worker_init_fn=f)", False),
        ("DataLoader(ds, num_workers=n, generator=None, worker_init_fn=f)", True),
        ("DataLoader(ds, num_workers=0)", False),
        ("DataLoader(ds, shuffle=True)", False),
        ("DataLoader(ds, **options)", False),
        ("DataLoader(ds, num_workers=2, generator=None, **options)", True),
        ("DataLoader(ds, 8, True, None, None, 4, None, False, False, 0, f, None, g)", False),
    ],
)
def test_dataloader_workers(call: str, flagged: bool) -> None:
    source = f"from torch.utils.data import DataLoader\nloader = {call}\n"
    assert ((2, "dataloader-unseeded-workers") in rules_in(source)) is flagged


@pytest.mark.parametrize(
    ("call", "unchecked"),
    [
        ("DataLoader(ds, **options)", True),
        ("DataLoader(ds, num_workers=4, generator=g, **options)", True),
        ("DataLoader(*args, shuffle=True)", True),
        ("DataLoader(ds, num_workers=0, **options)", False),
        ("DataLoader(ds, generator=g, worker_init_fn=f, **options)", False),
        ("DataLoader(ds, num_workers=2, generator=None, **options)", False),  # known missing: a warning
        ("DataLoader(ds, num_workers=2)", False),
    ],
)
def test_dataloader_options_from_kwargs_are_reported_as_unchecked(call: str, unchecked: bool) -> None:
    source = f"from torch.utils.data import DataLoader\nloader = {call}\n"
    assert ((2, "dataloader-unchecked") in rules_in(source)) is unchecked


def test_dataloader_unchecked_says_it_could_not_check() -> None:
    (finding,) = scan_source(
        "import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=4, **loader_kwargs)\n", "t.py"
    )
    assert finding.severity == "info"
    assert finding.message.startswith("DataLoader options come from **loader_kwargs, so the audit could not")
    assert "no generator" not in finding.message and "missing" not in finding.message
    assert "worker_init_fn=seed_worker" in finding.fix


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("train, val = random_split(ds, [0.8, 0.2])", True),
        ("train, val = torch.utils.data.random_split(ds, [8, 2], None)", True),
        ("parts = random_split(ds, [8, 2], generator=torch.default_generator)", True),
        ("parts = random_split(ds, [8, 2], generator=torch.Generator().manual_seed(42))", False),
        ("parts = random_split(ds, [8, 2], g)", False),
        ("parts = random_split(ds, [8, 2], **split_options)", False),
        ("parts = sklearn_like.random_split(ds, [8, 2])", False),
    ],
)
def test_random_split_without_a_generator(line: str, flagged: bool) -> None:
    source = f"import torch\nfrom torch.utils.data import random_split\n{line}\n"
    assert ((3, "random-split-unseeded") in rules_in(source)) is flagged


def test_random_split_is_neutralised_under_reprobox_and_says_the_fix() -> None:
    (finding,) = scan_source("from torch.utils.data import random_split\nrandom_split(d, [1, 1])\n", "t.py")
    assert "without generator=" in finding.message
    assert "generator=torch.Generator().manual_seed(seed)" in finding.fix
    assert finding.rule in COVERED_BY_REPROBOX


def test_dataloader_message_names_what_is_missing() -> None:
    (finding,) = scan_source(
        "import torch\ntorch.utils.data.DataLoader(d, num_workers=w, generator=g)\n", "t.py"
    )
    assert "num_workers=w but no worker_init_fn=" in finding.message
    assert "generator=g" in finding.fix and "worker_init_fn=seed_worker" in finding.fix


@pytest.mark.parametrize(
    "line",
    [
        "random.seed(time.time())",
        "torch.manual_seed(int(time.time()))",
        "trainer = Trainer(seed=time.time_ns())",
        "seed = int(datetime.now().timestamp())",
        "config.seed = time.perf_counter_ns()",
    ],
)
def test_seeds_from_the_clock(line: str) -> None:
    source = f"import random, time, torch\nfrom datetime import datetime\n{line}\n"
    assert rules_in(source) == [(3, "seed-from-clock")]


@pytest.mark.parametrize(
    "line",
    [
        "random.seed(int.from_bytes(os.urandom(4), 'big'))",
        "np.random.seed(secrets.randbelow(2**32))",
        "seed = uuid.uuid4().int",
    ],
)
def test_seeds_from_entropy(line: str) -> None:
    source = f"import os, random, secrets, uuid\nimport numpy as np\nimport torch\n{line}\n"
    assert rules_in(source) == [(4, "seed-from-entropy")]
    assert "seed-from-entropy" not in COVERED_BY_REPROBOX  # true entropy: reprobox cannot repeat it


@pytest.mark.parametrize(
    "line",
    [
        "random.seed()",
        "rng = random.Random()",
        "rng = np.random.default_rng()",
        "rng = np.random.default_rng(None)",
        "bits = np.random.PCG64()",
        "legacy = np.random.RandomState()",
        "torch.seed()",
        "torch.cuda.seed_all()",
    ],
)
def test_unseeded_generators(line: str) -> None:
    source = f"import random\nimport numpy as np\nimport torch\n{line}\n"
    assert rules_in(source) == [(4, "unseeded-generator")]
    assert "seed_unseeded_generators" in COVERED_BY_REPROBOX["unseeded-generator"]


def test_fixed_seeds_and_unrelated_clock_reads_are_fine() -> None:
    source = """
import random, time
import numpy as np
random.seed(0)
rng = np.random.default_rng(1234)
started = time.time()
log(started, seed=42)
"""
    assert rules_in(source) == []


def test_set_iteration_variants() -> None:
    source = """
words = ["b", "a"]
vocab = {w: i for i, w in enumerate(set(words))}
ordered = {w: i for i, w in enumerate(sorted(set(words)))}
items = list({"x", "y"})
also_fine = sorted(list(set(words)))
seen = set(words)
for w in seen:
    print(w)
for w in seen:
    table[w] = len(table)
n = len(seen)
def other_scope():
    seen = ["a", "b"]
    return list(seen)
"""
    assert rules_in(source) == [
        (3, "set-iteration-order"),
        (5, "set-iteration-order"),
        (10, "set-iteration-order"),
    ]


def test_a_name_rebound_to_a_list_is_not_a_set() -> None:
    source = "names = set(xs)\nnames = sorted(names)\nindex = list(names)\n"
    assert rules_in(source) == []


def test_uninitialized_empty_heuristic() -> None:
    source = """
import torch
from torch import nn

def read_first(n):
    acc = torch.empty(n)
    return acc.sum()

def filled_in_place(n):
    acc = torch.empty(n)
    acc.zero_()
    return acc.sum()

def filled_by_loop(n):
    acc = torch.empty(n, 2)
    for i in range(n):
        acc[i] = i
    return acc.sum()

def filled_by_out(a, b):
    acc = torch.empty(3)
    torch.add(a, b, out=acc)
    return acc

def filled_by_init(n):
    w = torch.empty(n, n)
    nn.init.xavier_uniform_(w)
    return w @ w

def view_then_fill(n):
    acc = torch.empty(n, 2)
    acc.view(-1).fill_(0)
    return acc * 2

def handed_to_other_code(n):
    acc = torch.empty(n)
    fill_somehow(acc)
    return acc + 1

def parameter(n):
    return nn.Parameter(torch.empty(n))

def metadata_then_read(n):
    acc = torch.empty(n)
    print(acc.shape, acc.dtype)
    return torch.relu(acc)

def chained(n):
    return torch.empty(n).uniform_(), torch.empty(n) * 2
"""
    findings = scan_source(source, "m.py")
    assert [(f.line, f.rule) for f in findings] == [
        (6, "uninitialized-empty"),
        (44, "uninitialized-empty"),
        (49, "uninitialized-empty"),
    ]
    assert "acc = torch.empty(...) is read on line 7 before it is filled" in findings[0].message
    assert "acc = torch.empty(...) is read on line 46 before it is filled" in findings[1].message


def test_attention_math_backend_is_the_fix() -> None:
    source = """
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
with sdpa_kernel(SDPBackend.MATH):
    out = F.scaled_dot_product_attention(q, k, v)
with sdpa_kernel(backends=[SDPBackend.EFFICIENT_ATTENTION]):
    out = F.scaled_dot_product_attention(q, k, v)
out = F.scaled_dot_product_attention(q, k, v)
"""
    findings = scan_source(source, "a.py")
    assert [(f.line, f.rule) for f in findings] == [
        (6, "fused-attention"),
        (7, "fused-attention"),
        (8, "fused-attention"),
    ]
    assert "sdpa_kernel(SDPBackend.MATH)" in findings[0].fix


def test_torch_compile_severity() -> None:
    source = """
import torch
a = torch.compile(model)
b = torch.compile(model, mode="max-autotune-no-cudagraphs")
c = torch.compile(model, mode="reduce-overhead")
model.compile(mode="max-autotune")
"""
    findings = scan_source(source, "c.py")
    assert [(f.line, f.rule, f.severity) for f in findings] == [
        (3, "compile", "info"),
        (4, "compile-autotune", "warning"),
        (5, "compile", "info"),
        (6, "compile-autotune", "warning"),
    ]


def test_settings_assigned_safe_values_are_fine() -> None:
    source = """
import torch
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True)
torch.use_deterministic_algorithms(mode=True, warn_only=True)
torch.set_deterministic_debug_mode("error")
torch.backends.cudnn.benchmark = args.benchmark
torch.set_deterministic_debug_mode(0)
"""
    assert rules_in(source) == [(8, "cudnn-benchmark"), (9, "deterministic-algorithms-off")]


def test_a_later_assignment_of_a_torch_setting_wins() -> None:
    source = """
import torch
from torch.backends import cudnn
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = False
def main():
    cudnn.benchmark = False
    cudnn.deterministic = True
torch.backends.cudnn.benchmark = args.fast
cudnn.benchmark = True
"""
    assert rules_in(source) == [(9, "cudnn-benchmark"), (10, "cudnn-benchmark")]


def test_a_setting_turned_unsafe_after_a_safe_one_is_reported() -> None:
    source = """
import torch
torch.backends.cudnn.benchmark = False
torch._inductor.config.max_autotune = True
torch._inductor.config.max_autotune = False
torch.backends.cudnn.benchmark = True
"""
    assert rules_in(source) == [(6, "cudnn-benchmark")]


def test_ignore_comments() -> None:
    source = """
import torch
x.index_add_(0, i, v)  # reprobox: ignore
x.index_add_(0, i, v)  # reprobox: ignore[index-add]
x.index_add_(0, i, v)  # reprobox: ignore[scatter-add]
torch.backends.cudnn.benchmark = True  # reprobox: ignore[index-add, cudnn-benchmark]
"""
    assert rules_in(source) == [(5, "index-add")]


# --- files and trees --------------------------------------------------------------------------------


def test_syntax_error_is_one_finding() -> None:
    findings = scan_source("import torch\ndef broken(:\n    pass\n", "broken.py")
    assert [(f.path, f.line, f.rule) for f in findings] == [("broken.py", 2, "syntax-error")]
    assert "cannot parse" in findings[0].message


def test_scan_tree_reports_unparsable_files_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("print 'python 2'\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\nx.index_add_(0, i, v)\n")
    (tmp_path / "notes.txt").write_text("x.index_add_(0, i, v)\n")
    findings = scan_tree(tmp_path)
    assert [(f.path, f.line, f.rule) for f in findings] == [
        ("bad.py", 1, "syntax-error"),
        ("latin.py", 3, "index-add"),
        ("nul.py", 1, "syntax-error"),
    ]


def test_scan_tree_excludes_folders(tmp_path: Path) -> None:
    for folder in (".venv", "pkg/__pycache__", "pkg", "build-out"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "ops.py").write_text("x.index_add_(0, i, v)\n")
    assert [f.path for f in scan_tree(tmp_path)] == ["build-out/ops.py", "pkg/ops.py"]
    assert [f.path for f in scan_tree(tmp_path, exclude=(".venv", "build*"))] == [
        "pkg/__pycache__/ops.py",
        "pkg/ops.py",
    ]


def test_scan_tree_needs_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist or is not a folder"):
        scan_tree(tmp_path / "missing")


def test_finding_json_round_trips() -> None:
    (finding,) = scan_source("import torch\ntorch.bincount(x, w)\n", "ops/count.py")
    data = json.loads(json.dumps(finding.to_json()))
    assert data == {
        "path": "ops/count.py",
        "line": 2,
        "column": 1,
        "rule": "bincount",
        "severity": "warning",
        "message": RULES["bincount"].message,
        "fix": RULES["bincount"].fix,
    }
    assert Finding(**data) == finding
    assert str(finding).startswith("ops/count.py:2:1: bincount: ")


def test_every_rule_reads_as_a_sentence() -> None:
    for rule in RULES.values():
        assert rule.message.endswith(".") and rule.fix.endswith("."), rule.id
        assert rule.severity in {"warning", "info"}


def test_scanning_never_imports_torch() -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom reprobox.hazards import scan_tree\n"
        f"scan_tree(Path({str(JOBS / 'hazards')!r}))\nassert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- beyond torch: libraries and patterns ------------------------------------------------------------


def test_tokenizers_example_is_named_without_importing_tokenizers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tokenizers' train_bert_wordpiece.py: verify catches its vocabulary differing; audit must name it."""
    from reprobox import cli

    job = JOBS / "audit-bert-wordpiece"
    training = next(f for f in scan_tree(job) if f.rule == "tokenizer-training")
    assert training.message.startswith("tokenizer.train() trains with tokenizers' WordPiece trainer")
    assert "hash map" in training.message and "differ from run to run" in training.message
    assert "tokenizers#1794" in training.fix and "Tokenizer.from_file" in training.fix
    assert "reprobox verify will show whether it matters" in training.fix
    assert training.rule not in COVERED_BY_REPROBOX  # no seed or variable of reprobox's reaches it
    capsys.readouterr()
    code = cli.main(["audit", str(job), "--static-only", "--json", "-q"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1 and result["status"] == "hazards"
    assert {f["rule"] for f in result["static"]} == {"tokenizer-training", "unsorted-listing"}
    code = (
        "import sys\nfrom pathlib import Path\nfrom reprobox.hazards import scan_tree\n"
        f"scan_tree(Path({str(job)!r}))\nassert 'tokenizers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


TOKENIZERS_IMPORTS = (
    "from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, CharBPETokenizer, Tokenizer\n"
    "from tokenizers import SentencePieceBPETokenizer, SentencePieceUnigramTokenizer, models, trainers\n"
    "from tokenizers.models import WordPiece\n"
    "from tokenizers.trainers import BpeTrainer, UnigramTrainer, WordLevelTrainer, WordPieceTrainer\n"
)


@pytest.mark.parametrize(
    ("code", "flagged"),
    [
        ("BertWordPieceTokenizer(lowercase=True).train(files)", True),
        ("tok = CharBPETokenizer()\ntok.train(files, vocab_size=500)", True),
        ("SentencePieceUnigramTokenizer().train_from_iterator(texts)", True),
        ("tok = Tokenizer(WordPiece(unk_token='[UNK]'))\ntok.train(files)", True),
        ("tok = Tokenizer(models.Unigram())\ntok.train_from_iterator(texts, None)", True),
        ("self.tok = Tokenizer(models.WordPiece())\nself.tok.train(files)", True),
        ("trainer = WordPieceTrainer(vocab_size=500)", True),
        ("trainer = trainers.UnigramTrainer()", True),
        ("trainer = BpeTrainer(continuing_subword_prefix='##')", True),
        ("trainer = BpeTrainer(end_of_word_suffix=suffix)", True),
        ("ByteLevelBPETokenizer().train(files)", False),
        ("SentencePieceBPETokenizer().train(files, vocab_size=500)", False),
        ("CharBPETokenizer().train(files, suffix=None)", False),
        ("trainer = BpeTrainer(vocab_size=500)", False),
        ("trainer = BpeTrainer(continuing_subword_prefix=None, end_of_word_suffix='')", False),
        ("trainer = WordLevelTrainer(special_tokens=['[UNK]'])", False),
        ("Tokenizer(models.BPE()).train(files)", False),
        ("tok = Tokenizer(WordPiece())\ntok.train(files, trainer=BpeTrainer())", False),
        ("tok = Tokenizer.from_file('tokenizer.json')\ntok.train(files)", False),
        ("model.train()\nmodel.train(True)", False),
    ],
)
def test_tokenizers_trainers_that_number_tokens_in_hash_map_order(code: str, flagged: bool) -> None:
    rules = [rule for _, rule in rules_in(TOKENIZERS_IMPORTS + code + "\n")]
    assert rules == (["tokenizer-training"] if flagged else [])


def test_retraining_a_pretrained_tokenizer_is_worth_checking_but_does_not_fail() -> None:
    source = (
        "from transformers import AutoTokenizer\n"
        "old = AutoTokenizer.from_pretrained('bert-base-uncased')\n"
        "new = old.train_new_from_iterator(texts, 5000)\n"
    )
    (finding,) = scan_source(source, "t.py")
    assert (finding.line, finding.rule, finding.severity) == (3, "tokenizer-retraining", "info")
    assert "WordPiece" in finding.message and "byte-level BPE" in finding.message


SET_ORDER_CASES = [
    ("vocab = dict.fromkeys(set(words))\nids = {w: i for i, w in enumerate(vocab)}", [2]),
    ("a = set(words)\nboth = a | {'<unk>'}\nlisted = list(both)", [3]),
    ("pairs = dict(zip(set(words), range(n)))", [1]),
    ("names = list(map(str.upper, set(words)))", [1]),
    ("keys = d.keys() - set(words)\nfirst = tuple(keys)", [2]),
    ("merged = set(a).union(b)\nout = [w for w in merged]", [2]),
    ("out.writelines(set(words))", [1]),
    ("for w in set(words):\n    print(w, file=out)", [1]),
    ("def gen(words):\n    for w in set(words):\n        yield w.upper()", [2]),
    ("a = set(words)\nordered = sorted(a | {'x'})", []),
    ("a = set(words)\nkept = [w for w in words if w in a]", []),
    ("upper = set(map(str.upper, set(words)))", []),
    ("pairs = sorted(zip(set(words), set(words)))", []),
    ("size = len(set(a) - set(b))", []),
    ("for w in set(words):\n    print(w)", []),
    ("flags = mask | 1\nvalues = list(flags)", []),
    ("merged = {**a, **b}\nvalues = list(merged | extra)", []),
]


@pytest.mark.parametrize(("code", "lines"), SET_ORDER_CASES)
def test_set_order_reaches_set_operations_dicts_from_sets_and_writes(code: str, lines: list[int]) -> None:
    assert rules_in(code + "\n") == [(line, "set-iteration-order") for line in lines]


LISTING_IMPORTS = "import glob, os\nfrom pathlib import Path\nimport tensorflow as tf\n"
LISTING_CASES = [
    ("files = glob.glob(pattern)\ndata = Dataset(files)", True),
    ("names = os.listdir(d)\nif sort:\n    names = sorted(names)\nuse(names)", True),
    ("paths = [os.path.join(d, n) for n in os.listdir(d)]", True),
    ("out = []\nfor p in Path(d).rglob('*.txt'):\n    out.append(p)", True),
    ("first = os.listdir(d)[0]", True),
    ("for i, name in enumerate(os.listdir(d)):\n    index[name] = i", True),
    ("with os.scandir(d) as it:\n    names = [e.name for e in it]", True),
    ("def files(d):\n    return glob.glob(d + '/*.bin')", True),
    ("out = []\nfor root, dirs, names in os.walk(d):\n    for n in names:\n        out.append(n)", True),
    (
        "out = []\nfor root, dirs, names in os.walk(d):\n    for n in sorted(names):\n        out.append(n)",
        True,
    ),
    ("files = sorted(glob.glob(pattern))", False),
    ("files = glob.glob(pattern)\nfiles.sort()\ndata = Dataset(files)", False),
    ("files = [f for f in os.listdir(d) if f.endswith('.txt')]\nfiles.sort()", False),
    ("found = 'a.txt' in os.listdir(d)\nempty = not os.listdir(d)\nn = len(glob.glob(p))", False),
    ("if os.listdir(d):\n    pass\nfor n in os.listdir(d):\n    os.remove(n)", False),
    ("out = []\nfor p in Path(d).iterdir():\n    out.append(p)\nout.sort()", False),
    ("suffixes = {p.suffix for p in Path(d).glob('*')}\nbiggest = max(os.listdir(d))", False),
    (
        "out = []\nfor root, dirs, names in os.walk(d):\n    dirs.sort()\n"
        "    for n in sorted(names):\n        out.append(n)",
        False,
    ),
    ("files = tf.io.gfile.glob(pattern)\ndata = Dataset(files)", False),
    ("listed = sorted(list(os.listdir(d)))", False),
]


@pytest.mark.parametrize(("code", "flagged"), LISTING_CASES)
def test_directory_listings_used_in_their_order(code: str, flagged: bool) -> None:
    rules = {rule for _, rule in rules_in(LISTING_IMPORTS + code + "\n")}
    assert ("unsorted-listing" in rules) is flagged


def test_unsorted_listing_names_the_call_and_the_sort() -> None:
    (finding,) = scan_source(
        "import os\nnames = os.listdir('data')\nshards = [load(n) for n in names]\n", "d.py"
    )
    assert (finding.line, finding.rule) == (2, "unsorted-listing")
    assert finding.message.startswith("os.listdir() returns entries in the order the file system keeps them")
    assert "sorted(os.listdir(d))" in finding.fix and "--vary file-order" in finding.fix
    assert finding.rule not in COVERED_BY_REPROBOX


COMPLETION_IMPORTS = "from concurrent.futures import as_completed\nimport concurrent.futures as cf\n"
COMPLETION_CASES = [
    ("results = []\nfor f in as_completed(futures):\n    results.append(f.result())", True),
    ("results = [f.result() for f in cf.as_completed(futures)]", True),
    ("total = 0.0\nfor r in pool.imap_unordered(work, items):\n    total += r", True),
    ("total = sum(pool.imap_unordered(work, items))", True),
    ("results = list(pool.imap_unordered(work, items))\nreport(results)", True),
    ("for f in as_completed(futures):\n    f.result()", False),
    ("done = 0\nfor f in as_completed(futures):\n    done += 1", False),
    ("results = sorted(pool.imap_unordered(work, items))", False),
    ("results = list(pool.imap(work, items))\nreport(results)", False),
    ("for r in pool.imap_unordered(work, items):\n    table[r.key] = r", False),
]


@pytest.mark.parametrize(("code", "flagged"), COMPLETION_CASES)
def test_results_taken_in_the_order_workers_finish(code: str, flagged: bool) -> None:
    rules = {rule for _, rule in rules_in(COMPLETION_IMPORTS + code + "\n")}
    assert ("completion-order" in rules) is flagged


NAMES_IMPORTS = (
    "import json, os, socket, sys, tempfile, time, uuid\nfrom datetime import datetime\n"
    "from pathlib import Path\nimport torch\n"
)
NAME_CASES = [
    ("torch.save(m, f\"ckpt-{time.strftime('%Y%m%d')}.pt\")", "run-specific-name"),
    ("stamp = datetime.now().strftime('%H%M')\nfolder = Path('runs') / stamp", "run-specific-name"),
    ("log = open(os.path.join(d, f'{socket.gethostname()}.log'), 'w')", "run-specific-name"),
    ("json.dump({'host': socket.gethostname()}, f)", "run-specific-name"),
    ("Path(d, f'worker-{os.getpid()}.txt').write_text('x')", "run-specific-name"),
    ("STAMP = time.time()\ndef save(m):\n    torch.save(m, f'm-{STAMP}.pt')", "run-specific-name"),
    ("torch.save(state, out / f'{uuid.uuid4()}.pt')", "random-name"),
    ("run_id = uuid.uuid4().hex\nos.makedirs(os.path.join(out, run_id))", "random-name"),
    ("tmp = tempfile.mkdtemp()\njson.dump({'work': tmp}, f)", "random-name"),
    ("with tempfile.TemporaryDirectory() as d:\n    f.write(d)", "random-name"),
    ("token = os.urandom(8).hex()\nprint(token, file=f)", "random-name"),
    (
        "elapsed = time.time() - t0\njson.dump({'elapsed': elapsed, 'at': datetime.now().isoformat()}, f)",
        None,
    ),
    ("torch.save(m, os.path.join(tempfile.mkdtemp(), 'm.pt'))", None),
    ("rate = n / (time.time() - t0)\nshare = total / time.monotonic()", None),
    ("print(socket.gethostname(), uuid.uuid4())\nprint(os.getpid(), file=sys.stderr)", None),
    ("n = len(os.listdir(tempfile.mkdtemp()))\njson.dump({'n': n}, f)", None),
    ("json.dump({'parent': str(Path(tempfile.mkdtemp()).parent)}, f)", None),
    ("stamp = time.time()\ndef save(m, stamp):\n    torch.save(m, f'm-{stamp}.pt')", None),
    ("torch.save(m, f\"ckpt-{time.strftime('%Y', fixed)}.pt\")", None),
]


@pytest.mark.parametrize(("code", "rule"), NAME_CASES)
def test_run_specific_values_in_file_names_and_outputs(code: str, rule: str | None) -> None:
    assert [r for _, r in rules_in(NAMES_IMPORTS + code + "\n")] == ([rule] if rule else [])


def test_names_from_the_clock_are_info_and_random_names_fail() -> None:
    source = NAMES_IMPORTS + "torch.save(m, f'{time.time()}.pt')\ntorch.save(m, f'{uuid.uuid4()}.pt')\n"
    clock, random_name = scan_source(source, "t.py")
    assert (clock.rule, clock.severity) == ("run-specific-name", "info")
    assert clock.message.startswith("A file name is built from time.time(); it differs between runs")
    assert "reproduced, not bit-identical" in clock.fix
    assert (random_name.rule, random_name.severity) == ("random-name", "warning")
    assert "uuid.uuid5(namespace, name)" in random_name.fix
    assert "random-name" not in COVERED_BY_REPROBOX


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("t = time.time()\nrandom.seed(t)", [(5, "seed-from-clock")]),
        ("started = time.time_ns()\nrng = np.random.default_rng(started)", [(5, "seed-from-clock")]),
        ("rng = random.Random(int(datetime.now().timestamp()))", [(4, "seed-from-clock")]),
        ("token = os.urandom(4)\nnp.random.seed(int.from_bytes(token, 'big'))", [(5, "seed-from-entropy")]),
        ("seed = int(time.time())\nrandom.seed(seed)", [(4, "seed-from-clock")]),
        ("t = time.time()\nrandom.seed(0)\nlog(t)", []),
    ],
)
def test_generators_seeded_from_the_clock_through_names(code: str, found: list[tuple[int, str]]) -> None:
    source = f"import os, random, time\nfrom datetime import datetime\nimport numpy as np\n{code}\n"
    assert rules_in(source) == found


@pytest.mark.parametrize(
    ("call", "flagged"),
    [
        ("RandomForestClassifier(n_estimators=10)", True),
        ("KMeans(n_clusters=3, random_state=None)", True),
        ("train_test_split(X, y, test_size=0.2)", True),
        ("KFold(5, shuffle=True)", True),
        ("TSNE(n_components=2)", True),
        ("RandomForestClassifier(random_state=0)", False),
        ("train_test_split(X, y, shuffle=False)", False),
        ("KFold(5)", False),
        ("LogisticRegression()", False),
        ("RandomForestClassifier(**params)", False),
        ("mylib.RandomForestClassifier()", False),
    ],
)
def test_sklearn_without_random_state(call: str, flagged: bool) -> None:
    source = (
        "import mylib\nfrom sklearn.ensemble import RandomForestClassifier\n"
        "from sklearn.cluster import KMeans\nfrom sklearn.manifold import TSNE\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "from sklearn.model_selection import KFold, train_test_split\n"
        f"model = {call}\n"
    )
    assert rules_in(source) == ([(7, "sklearn-random-state")] if flagged else [])


def test_sklearn_random_state_is_neutralised_under_reprobox() -> None:
    (finding,) = scan_source("import sklearn.ensemble as e\nm = e.ExtraTreesRegressor()\n", "t.py")
    assert finding.message.startswith("ExtraTreesRegressor() without random_state draws from NumPy's global")
    assert "random_state=seed" in finding.fix
    assert "NumPy's global RNG" in COVERED_BY_REPROBOX[finding.rule]


@pytest.mark.parametrize(
    ("call", "flagged"),
    [
        ("lgb.LGBMClassifier(n_estimators=10)", True),
        ("LGBMRegressor(deterministic=True)", True),
        ("lgb.train({'objective': 'binary'}, data)", True),
        ("lgb.cv(dict(objective='binary', deterministic=True), data)", True),
        ("lgb.LGBMClassifier(deterministic=True, force_row_wise=True)", False),
        ("lgb.train({'deterministic': True, 'force_col_wise': True}, data)", False),
        ("lgb.train(params, data)", False),
        ("lgb.LGBMClassifier(**options)", False),
        ("lgb.Dataset(features, labels)", False),
    ],
)
def test_lightgbm_without_deterministic_mode(call: str, flagged: bool) -> None:
    source = f"import lightgbm as lgb\nfrom lightgbm import LGBMRegressor\nmodel = {call}\n"
    assert rules_in(source) == ([(3, "lightgbm-nondeterministic")] if flagged else [])


def test_dataloader_workers_are_reported_as_handled_by_reprobox() -> None:
    (finding,) = scan_source(
        "from torch.utils.data import DataLoader\nDataLoader(d, num_workers=4)\n", "t.py"
    )
    assert "reprobox seeds torch's global RNG" in COVERED_BY_REPROBOX[finding.rule]


def test_audit_says_info_findings_do_not_fail_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reprobox import cli

    (tmp_path / "job.yaml").write_text("version: 1\nname: retrain\ncommand: [python, train.py]\n")
    (tmp_path / "train.py").write_text(
        "from transformers import AutoTokenizer\n"
        "AutoTokenizer.from_pretrained('gpt2').train_new_from_iterator(['a b'], 300)\n"
    )
    capsys.readouterr()
    assert cli.main(["audit", str(tmp_path), "--static-only"]) == 0
    text = capsys.readouterr()
    assert "tokenizer-retraining" in text.out + text.err
    assert "no hazards that fail the audit; 1 to check (info)" in text.out + text.err
