"""Truth: the four files the example writes (result.pkl, result.gz, result_without_objective.pkl,
result_without_objective_2.pkl), each loaded with skopt.load, hold the same OptimizeResult in both runs:
the points tried, their noisy values, the best point, the 12 fitted Gaussian processes, the space, the
RandomState and the specs. The noise comes from NumPy's global generator, so the result depends on its
seed. The objective is pickled by reference (__main__.obj_fun): a stand-in of that name lets the
loader resolve it, and it is compared by its qualified name."""

import sys
from pathlib import Path

import __main__

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

from runner import run_twice, verdict  # noqa: E402
from skopt import load  # noqa: E402
from values import differences  # noqa: E402

FILES = ["result.pkl", "result.gz", "result_without_objective.pkl", "result_without_objective_2.pkl"]


def obj_fun(x, noise_level=0.1):
    """Stands in for the script's objective, which the result names as __main__.obj_fun."""
    raise AssertionError("the truth never evaluates the objective")


__main__.obj_fun = obj_fun


def result(path: Path) -> dict:
    res = dict(load(path))
    args = dict(res["specs"]["args"])
    if "func" in args:
        args["func"] = f"{args['func'].__module__}.{args['func'].__qualname__}"
    res["specs"] = {**res["specs"], "args": args}
    res["random_state"] = res["random_state"].get_state(legacy=False)
    return res


a, b = run_twice(HERE)
diffs = []
for name in FILES:
    diffs += differences(result(a / name), result(b / name), name)
first = result(a / "result.pkl")
verdict(
    diffs,
    f"{len(FILES)} results: equal x_iters ({len(first['x_iters'])}), func_vals, best point, "
    f"{len(first['models'])} fitted models, space, RandomState and specs",
)
