"""Truth: both runs' word2vec.model, loaded with Word2Vec.load, hold the same model: word vectors,
output weights (syn1neg), vocabulary, counts, its RandomState and every other attribute, but for what
gensim makes run-specific by construction: total_train_time (a sum of default_timer() differences), and
in lifecycle_events each event's datetime (datetime.now().isoformat()) and, in the one that reports
training, the seconds it took and the words per second ("took 0.0s, 2793 effective words/s": a
duration of the clock and a count over it). The page trains with workers=4: whether the four threads
make the weights differ is what this measures."""

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

from gensim.models import Word2Vec  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

TOOK = re.compile(r"took \d+\.\ds, \d+ effective words/s")


def model_state(run: Path) -> dict:
    model = Word2Vec.load(str(run / "word2vec.model"))
    state = {k: v for k, v in vars(model).items() if k not in ("wv", "random", "lifecycle_events", "load")}
    assert state.pop("total_train_time") > 0
    state["wv"] = dict(vars(model.wv))
    state["random"] = model.random.get_state(legacy=False)
    events = []
    for logged in model.lifecycle_events:
        if logged["event"] == "loaded":  # added by Word2Vec.load itself, not read from the file
            continue
        event = dict(logged)
        del event["datetime"]
        if "msg" in event and event["msg"].startswith("training on "):
            assert TOOK.search(event["msg"]), event["msg"]
            event["msg"] = TOOK.sub("took <seconds>, <rate> effective words/s", event["msg"])
        events.append(event)
    state["lifecycle_events"] = events
    return state


a, b = run_twice(HERE)
state_a, state_b = model_state(a), model_state(b)
diffs = differences(state_a, state_b, "word2vec.model")
verdict(
    diffs,
    f"word2vec.model: equal vectors ({state_a['wv']['vectors'].shape}), syn1neg, vocabulary and "
    "RandomState; only total_train_time and the lifecycle events' datetimes and training time differ",
)
