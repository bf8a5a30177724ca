"""Conditions of the call rules for libraries other than torch: Hugging Face tokenizers' trainers,
scikit-learn's random_state and LightGBM's deterministic mode. Each returns None to let a call pass, or
the detail that fills its rule's message.

What each claims was checked against the library itself:
- tokenizers (Rust, `tokenizers/src/models/*/trainer.rs`): the BPE trainer, which WordPiece training goes
  through, gives ids to the subword tokens it makes with a continuing_subword_prefix ("##") or an
  end_of_word_suffix in the iteration order of an `AHashMap` (ahash keys are random in every process) and
  breaks ties between equally frequent merges by those ids (huggingface/tokenizers#1794, open); the
  Unigram trainer takes its sentences and required characters from such maps. Without a prefix or suffix
  the BPE trainer numbers its alphabet in sorted order, and the WordLevel trainer sorts by count, then
  word. Trained 12 times each in fresh processes with tokenizers 0.23.3, the WordPiece, CharBPE and
  Unigram vocabularies differed every time (and in 6 more runs each with PYTHONHASHSEED=0 and
  TOKENIZERS_PARALLELISM=false); ByteLevelBPE, SentencePieceBPE, a plain BpeTrainer and WordLevel came out
  the same every time.
- scikit-learn: random_state=None is `check_random_state(None)`, "the RandomState singleton used by
  np.random"; the estimators listed below draw from it on every fit (tree estimators permute the
  features at every split whatever max_features is).
- LightGBM: `deterministic` (default false, CPU only) "should ensure the stable results when using the
  same data and the same parameters (and different num_threads)", and its docs ask for force_col_wise or
  force_row_wise with it: otherwise LightGBM picks one of the two by timing both.
"""

from __future__ import annotations

import ast

from reprobox.hazards._syntax import _arg, _Callee, _has_splat, _is_const, _names

# -- tokenizers ----------------------------------------------------------------------------------------

_HASH_MAP = "a Rust hash map whose keys are random in every process"
WORDPIECE = (
    "tokenizers' WordPiece trainer, which (through its BPE trainer, with a '##' prefix) numbers the subword "
    f"tokens it makes in the iteration order of {_HASH_MAP} and breaks ties between equally frequent merges "
    "by those numbers"
)
BPE_AFFIX = (
    "tokenizers' BPE trainer with a continuing_subword_prefix or end_of_word_suffix, which numbers the "
    f"subword tokens it makes in the iteration order of {_HASH_MAP} and breaks ties between equally frequent "
    "merges by those numbers"
)
UNIGRAM = (
    "tokenizers' Unigram trainer, which sums its statistics and orders equally scored pieces in the "
    "iteration order of Rust hash maps whose keys are random in every process"
)


def _no_affix(value: ast.expr | None) -> bool:
    return value is None or _is_const(value, None, "")


def tokenizers_trainer(call: ast.Call, callee: _Callee) -> str | None:
    """WordPieceTrainer(...) and UnigramTrainer(...) always; BpeTrainer(...) with a prefix or suffix."""
    if callee.last == "WordPieceTrainer":
        return f"WordPieceTrainer() is {WORDPIECE}"
    if callee.last == "UnigramTrainer":
        return f"UnigramTrainer() is {UNIGRAM}"
    prefix = _arg(call, "continuing_subword_prefix", None)
    suffix = _arg(call, "end_of_word_suffix", None)
    if _no_affix(prefix) and _no_affix(suffix):
        return None
    return f"BpeTrainer() here is {BPE_AFFIX}"


def retrains_tokenizer(_call: ast.Call, callee: _Callee) -> str | None:
    return f"{callee.last}()"


# -- scikit-learn ----------------------------------------------------------------------------------------

# Estimators and splitters that draw random numbers on every fit or split; KFold and StratifiedKFold only
# with shuffle=True, train_test_split unless shuffle=False.
SKLEARN_RANDOM = _names(
    "RandomForestClassifier RandomForestRegressor ExtraTreesClassifier ExtraTreesRegressor "
    "GradientBoostingClassifier GradientBoostingRegressor IsolationForest BaggingClassifier "
    "BaggingRegressor RandomTreesEmbedding DecisionTreeClassifier DecisionTreeRegressor "
    "ExtraTreeClassifier ExtraTreeRegressor KMeans MiniBatchKMeans BisectingKMeans TSNE MLPClassifier "
    "MLPRegressor SGDClassifier SGDRegressor TruncatedSVD GaussianMixture BayesianGaussianMixture "
    "train_test_split ShuffleSplit StratifiedShuffleSplit RepeatedKFold RepeatedStratifiedKFold KFold "
    "StratifiedKFold"
)
_SHUFFLE_OPT_IN = _names("KFold StratifiedKFold")


def sklearn_unseeded(call: ast.Call, callee: _Callee) -> str | None:
    if _has_splat(call):
        return None  # random_state may be among the options
    shuffle = _arg(call, "shuffle", None)
    if callee.last in _SHUFFLE_OPT_IN and not _is_const(shuffle, True):
        return None
    if callee.last == "train_test_split" and _is_const(shuffle, False):
        return None
    state = _arg(call, "random_state", None)
    if state is None:
        return f"{callee.last}() without random_state"
    return f"{callee.last}(random_state=None)" if _is_const(state, None) else None


# -- LightGBM ----------------------------------------------------------------------------------------

LIGHTGBM_ESTIMATORS = _names("LGBMClassifier LGBMRegressor LGBMRanker LGBMModel")


def lightgbm_not_deterministic(call: ast.Call, callee: _Callee) -> str | None:
    """LGBM*(...) keyword arguments, or the literal params dict of lightgbm.train/cv."""
    if callee.last in LIGHTGBM_ESTIMATORS:
        if _has_splat(call):
            return None
        options = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    else:
        found = _literal_params(_arg(call, "params", 0))
        if found is None:
            return None
        options = found
    enabled = {name for name, value in options.items() if _is_const(value, True, "true")}
    if "deterministic" not in enabled:
        return f"{callee.last}() without deterministic=True"
    if not enabled & {"force_row_wise", "force_col_wise"}:
        return f"{callee.last}() with deterministic=True but neither force_row_wise nor force_col_wise"
    return None


def _literal_params(params: ast.expr | None) -> dict[str, ast.expr] | None:
    """A params dict written out in the call ({...} or dict(...)); None when it cannot be read."""
    if isinstance(params, ast.Dict):
        if any(key is None for key in params.keys):
            return None  # {**defaults, ...}
        keys = [key.value if isinstance(key, ast.Constant) else None for key in params.keys]
        return {k: v for k, v in zip(keys, params.values, strict=True) if isinstance(k, str)}
    if isinstance(params, ast.Call) and isinstance(params.func, ast.Name) and params.func.id == "dict":
        if params.args or _has_splat(params):
            return None
        return {kw.arg: kw.value for kw in params.keywords if kw.arg}
    return None
