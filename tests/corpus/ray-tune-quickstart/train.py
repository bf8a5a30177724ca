# Ray Tune, "Getting Started" / the Ray Tune quickstart (https://docs.ray.io/en/latest/tune/index.html):
# a grid and a random choice over an objective, results kept next to the script (storage_path)
# rather than in ~/ray_results.
import os

from ray import tune


def objective(config):  # ①
    score = config["a"] ** 2 + config["b"]
    return {"score": score}


search_space = {  # ②
    "a": tune.grid_search([0.001, 0.01, 0.1, 1.0]),
    "b": tune.choice([1, 2, 3]),
}

tuner = tune.Tuner(
    objective,
    param_space=search_space,
    run_config=tune.RunConfig(storage_path=os.path.abspath("ray_results"), name="quickstart"),
)  # ③

results = tuner.fit()
print(results.get_best_result(metric="score", mode="min").config)
results.get_dataframe().to_csv("results.csv")
