"""`verify --vary`: which difference between two machines changes a job's result.

`factors` is the registry (each factor's documented pair of values and how a run gets them),
`change` applies a value to a run, `orchestrate` runs the baseline and the varied runs, `matrix`
judges them and says the verdict, `bisect` finds a smallest combination that matters, `attested`
puts the matrix into the attestation of the baseline's runs.
"""

from reprobox.forensics.variation.attested import attestable, variation_entry, variation_statement
from reprobox.forensics.variation.factors import ALL, FACTORS, WORKERS_VARIABLE, factor_table, parse_factors
from reprobox.forensics.variation.matrix import (
    FAILED_RUN,
    INVARIANT,
    SENSITIVE,
    UNDECIDED,
    UNSUPPORTED,
    FactorResult,
    VariationResult,
)
from reprobox.forensics.variation.orchestrate import VaryOptions, runtime_variations, vary

__all__ = [
    "ALL",
    "FACTORS",
    "FAILED_RUN",
    "INVARIANT",
    "SENSITIVE",
    "UNDECIDED",
    "UNSUPPORTED",
    "WORKERS_VARIABLE",
    "FactorResult",
    "VariationResult",
    "VaryOptions",
    "attestable",
    "factor_table",
    "parse_factors",
    "runtime_variations",
    "variation_entry",
    "variation_statement",
    "vary",
]
