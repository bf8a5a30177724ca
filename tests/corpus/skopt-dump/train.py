# scikit-optimize, "Store and load skopt optimization results"
# (https://scikit-optimize.github.io/stable/auto_examples/store-and-load-results.html): gp_minimize on a
# noisy 1-D function (noise from NumPy's global generator), the result stored with skopt.dump, compressed,
# without the objective, and with the objective deleted.
import numpy as np
from skopt import gp_minimize
noise_level = 0.1


def obj_fun(x, noise_level=noise_level):
    return np.sin(5 * x[0]) * (1 - np.tanh(x[0] ** 2)) + np.random.randn() \
        * noise_level

res = gp_minimize(obj_fun,            # the function to minimize
                  [(-2.0, 2.0)],      # the bounds on each dimension of x
                  x0=[0.],            # the starting point
                  acq_func="LCB",     # the acquisition function (optional)
                  n_calls=15,         # the number of evaluations of f including at x0
                  n_random_starts=3,  # the number of random initial points
                  random_state=777)

from skopt import dump, load

dump(res, 'result.pkl')

res_loaded = load('result.pkl')

res_loaded.fun

dump(res, 'result.gz', compress=9)

from os.path import getsize
print('Without compression: {} bytes'.format(getsize('result.pkl')))
print('Compressed with gz:  {} bytes'.format(getsize('result.gz')))

dump(res, 'result_without_objective.pkl', store_objective=False)

res_loaded_without_objective = load('result_without_objective.pkl')

print('Loaded object: ', res_loaded_without_objective.specs['args'].keys())
print('Local variable:', res.specs['args'].keys())

del res.specs['args']['func']

dump(res, 'result_without_objective_2.pkl')
