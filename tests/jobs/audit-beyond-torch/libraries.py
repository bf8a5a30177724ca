"""Known nondeterministic calls of libraries beyond torch; each planted line carries a hazard comment."""

import random
import time

import lightgbm as lgb
import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, train_test_split
from tokenizers import (
    BertWordPieceTokenizer,
    ByteLevelBPETokenizer,
    CharBPETokenizer,
    SentencePieceUnigramTokenizer,
    Tokenizer,
    models,
    trainers,
)
from transformers import AutoTokenizer


def vocabularies(files: list[str], texts: list[str]) -> list[object]:
    BertWordPieceTokenizer().train(files)  # hazard: tokenizer-training
    chars = CharBPETokenizer()
    chars.train(files, vocab_size=500)  # hazard: tokenizer-training
    chars.train(files, suffix=None)
    SentencePieceUnigramTokenizer().train_from_iterator(texts)  # hazard: tokenizer-training
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.train(files)  # hazard: tokenizer-training
    wordpiece.train(files, trainer=trainers.BpeTrainer(vocab_size=500))
    trainer = trainers.WordPieceTrainer(vocab_size=500)  # hazard: tokenizer-training
    unigram = trainers.UnigramTrainer()  # hazard: tokenizer-training
    prefixed = trainers.BpeTrainer(continuing_subword_prefix="##")  # hazard: tokenizer-training
    plain = trainers.BpeTrainer(vocab_size=500)
    words = trainers.WordLevelTrainer(special_tokens=["[UNK]"])
    ByteLevelBPETokenizer().train(files, vocab_size=500)
    Tokenizer(models.BPE()).train(files)
    base = AutoTokenizer.from_pretrained("bert-base-uncased")
    retrained = base.train_new_from_iterator(texts, 500)  # hazard: tokenizer-retraining
    return [trainer, unigram, prefixed, plain, words, retrained]


def estimators(features: np.ndarray, labels: np.ndarray, params: dict[str, object]) -> list[object]:
    forest = RandomForestClassifier(n_estimators=10)  # hazard: sklearn-random-state
    split = train_test_split(features, labels, test_size=0.2)  # hazard: sklearn-random-state
    folds = KFold(5, shuffle=True, random_state=None)  # hazard: sklearn-random-state
    seeded = RandomForestClassifier(random_state=0)
    unshuffled = train_test_split(features, labels, shuffle=False)
    plain_folds = KFold(5)
    linear = LogisticRegression()
    hidden = RandomForestClassifier(**params)
    booster = lgb.LGBMClassifier(n_estimators=10)  # hazard: lightgbm-nondeterministic
    half = lgb.LGBMRegressor(deterministic=True)  # hazard: lightgbm-nondeterministic
    data = lgb.Dataset(features, labels)
    trained = lgb.train({"objective": "binary"}, data)  # hazard: lightgbm-nondeterministic
    steady = lgb.LGBMClassifier(deterministic=True, force_row_wise=True)
    steady_too = lgb.train({"deterministic": True, "force_col_wise": True}, data)
    unread = lgb.train(params, data)
    quiet = [seeded, unshuffled, plain_folds, linear, hidden, steady, steady_too, unread]
    return [forest, split, folds, booster, half, trained, *quiet]


def generators() -> list[object]:
    started = time.time()
    random.seed(started)  # hazard: seed-from-clock
    rng = np.random.default_rng(int(time.time()))  # hazard: seed-from-clock
    seed = int(time.time())  # hazard: seed-from-clock
    random.seed(seed)  # reported where `seed` is assigned
    return [steady_generator(), rng]


def steady_generator() -> object:
    return np.random.default_rng(1234)
