# statsmodels, the OLS example of the documentation's front page
# (https://www.statsmodels.org/stable/index.html), saved with results.save as "Pickling" shows
# (https://www.statsmodels.org/stable/generated/statsmodels.regression.linear_model.RegressionResults.save.html).
import numpy as np
import statsmodels.api as sm

# Generate artificial data (2 regressors + constant)
nobs = 100
X = np.random.random((nobs, 2))
X = sm.add_constant(X)
beta = [1, 0.1, 0.5]
e = np.random.random(nobs)
y = np.dot(X, beta) + e

# Fit regression model
results = sm.OLS(y, X).fit()

# Inspect the results
print(results.summary())
results.save("ols_results.pickle")
