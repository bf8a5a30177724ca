"""The first-divergence drill-down: which operation, in which module, at which line, made two runs differ.

`drill_down` replays a job to the step where its runs first differ with every operation of that step
recorded, and names the first diverging operation and its cause; `analyze` does the naming for two
runs that already hold operation logs.
"""

from reprobox.forensics.drilldown._cause import first_operation
from reprobox.forensics.drilldown._flow import REPLAYS_DIR, DrillDown, analyze, drill_down, replays_dir
from reprobox.forensics.drilldown._text import DATA, INPUT, OPERATION, PATH, RNG, module_text
from reprobox.forensics.drilldown._versions import CODE, first_changed_operation

__all__ = [
    "CODE",
    "DATA",
    "INPUT",
    "OPERATION",
    "PATH",
    "REPLAYS_DIR",
    "RNG",
    "DrillDown",
    "analyze",
    "drill_down",
    "first_changed_operation",
    "first_operation",
    "module_text",
    "replays_dir",
]
