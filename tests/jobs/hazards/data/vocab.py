"""Vocabulary building with the Python-level hazards planted; each planted line carries a hazard comment."""

import os
import secrets
import uuid
from datetime import datetime

import numpy as np

CORPUS = ["the", "cat", "sat", "on", "the", "mat"]


def vocabularies(words: list[str]) -> list[object]:
    by_enumerate = {w: i for i, w in enumerate(set(words))}  # hazard: set-iteration-order
    as_list = list(set(words))  # hazard: set-iteration-order
    seen = set(words)
    as_tuple = tuple(seen)  # hazard: set-iteration-order
    ids = [len(w) for w in seen]  # hazard: set-iteration-order
    joined = " ".join({w.upper() for w in words})  # hazard: set-iteration-order
    index = {}
    for w in seen:  # hazard: set-iteration-order
        index[w] = len(index)
    ordered = {w: i for i, w in enumerate(sorted(set(words)))}
    also_ordered = sorted(seen)
    count = len(seen)
    longest = max(len(w) for w in seen)
    tally = 0
    for w in seen:
        tally += len(w)
    return [by_enumerate, as_list, as_tuple, ids, joined, index, ordered, also_ordered, count, longest, tally]


def generators() -> list[object]:
    entropy_seed = int.from_bytes(os.urandom(4), "little")  # hazard: seed-from-entropy
    rng = np.random.default_rng()  # hazard: unseeded-generator
    fixed = np.random.default_rng(1234)
    token_rng = np.random.default_rng(secrets.randbits(32))  # hazard: seed-from-entropy
    run_seed = uuid.uuid4().int % 2**32  # hazard: seed-from-entropy
    stamp = np.random.RandomState(seed=int(datetime.now().timestamp()))  # hazard: seed-from-clock
    return [entropy_seed, rng, fixed, token_rng, run_seed, stamp]
