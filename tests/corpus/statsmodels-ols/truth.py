"""Truth: both runs' ols_results.pickle load (statsmodels' sm.load) into equal params, bse, residuals,
R squared and design matrices."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
import statsmodels.api as sm  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE)
res_a, res_b = sm.load(str(a / "ols_results.pickle")), sm.load(str(b / "ols_results.pickle"))
diffs = []
for name in ("params", "bse", "resid", "rsquared", "fittedvalues"):
    if not np.array_equal(np.asarray(getattr(res_a, name)), np.asarray(getattr(res_b, name))):
        diffs.append(f"ols_results.pickle: {name} differs")
if not np.array_equal(res_a.model.exog, res_b.model.exog) or not np.array_equal(
    res_a.model.endog, res_b.model.endog
):
    diffs.append("ols_results.pickle: the model's data differ")
verdict(diffs, "ols_results.pickle: equal data, coefficients, standard errors and residuals")
