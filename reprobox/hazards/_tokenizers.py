"""Part of the `tokenizer-training` rule: `.train(...)` and `.train_from_iterator(...)` on a tokenizers
object whose trainer numbers tokens in hash-map order (why, in `_library_conditions`).

The trainers built by hand (`WordPieceTrainer(...)`, ...) are call rules; this module covers the trainers
a tokenizer builds itself: the ready-made classes (`BertWordPieceTokenizer().train(files)`) and
`Tokenizer(WordPiece(...)).train(files)` without a trainer, which trains with the model's own default.
Objects are recognised where the file constructs them: called on the constructor, or on a name or
attribute (`self.tokenizer`) that some assignment in the file binds to one.
"""

from __future__ import annotations

import ast

from reprobox.hazards._file import FileContext
from reprobox.hazards._library_conditions import BPE_AFFIX, UNIGRAM, WORDPIECE, _no_affix
from reprobox.hazards._syntax import _arg, _Callee, _is_const

# Ready-made tokenizers whose train() builds such a trainer; ByteLevelBPETokenizer and
# SentencePieceBPETokenizer build a BpeTrainer without prefix or suffix, which numbers in a fixed order.
_IMPLEMENTATIONS = {
    "BertWordPieceTokenizer": WORDPIECE,
    "CharBPETokenizer": BPE_AFFIX,  # end_of_word_suffix "</w>" unless train(suffix=None)
    "SentencePieceUnigramTokenizer": UNIGRAM,
}
# Models whose default trainer (Tokenizer.train without one) is such a trainer; BPE's default has no affix.
_MODELS = {"WordPiece": WORDPIECE, "Unigram": UNIGRAM}
_TRAIN_METHODS = frozenset({"train", "train_from_iterator"})


class TokenizerTraining:
    """Finds tokenizers trained with a trainer that numbers tokens in hash-map order, in one file."""

    def __init__(self, file: FileContext) -> None:
        self.file = file
        self.objects: dict[str, tuple[str, bool]] = {}  # target text -> (why, built from a model)
        if not any(path.split(".")[0] == "tokenizers" for path in file.aliases.values()):
            return  # nothing in the file can be a tokenizers object
        for node in ast.walk(file.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                made = self._constructed(node.value)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if made is not None and isinstance(target, (ast.Name, ast.Attribute)):
                        self.objects[ast.unparse(target)] = made

    def _constructed(self, call: ast.Call) -> tuple[str, bool] | None:
        """(why, built from a model) for a tokenizers object whose own trainer is a hazard."""
        callee = self.file.resolve(call.func)
        if (callee.qualname or "").split(".")[0] != "tokenizers":
            return None
        if callee.last in _IMPLEMENTATIONS:
            return _IMPLEMENTATIONS[callee.last], False
        model = _arg(call, "model", 0)
        if callee.last != "Tokenizer" or not isinstance(model, ast.Call):
            return None
        model_callee = self.file.resolve(model.func)
        in_tokenizers = (model_callee.qualname or "").split(".")[0] == "tokenizers"
        why = _MODELS.get(model_callee.last) if in_tokenizers else None
        return (why, True) if why is not None else None

    def check_call(self, node: ast.Call, callee: _Callee) -> None:
        if not isinstance(node.func, ast.Attribute) or callee.last not in _TRAIN_METHODS:
            return
        receiver = node.func.value
        if isinstance(receiver, ast.Call):
            made = self._constructed(receiver)
        else:
            made = self.objects.get(ast.unparse(receiver))
        if made is None:
            return
        why, from_model = made
        trainer = _arg(node, "trainer", 1)
        if from_model and trainer is not None and not _is_const(trainer, None):
            return  # a trainer of its own: checked where it is built
        suffix = _arg(node, "suffix", None)
        if why is BPE_AFFIX and suffix is not None and _no_affix(suffix):
            return  # CharBPETokenizer.train(suffix=None): no suffix, no hash-map numbering
        name = receiver.func if isinstance(receiver, ast.Call) else receiver
        self.file.report(node, "tokenizer-training", f"{ast.unparse(name)}.{callee.last}() trains with {why}")
