"""``streamc sweep``: many builds of one model over a grid or list of build-config values, on Dask.

:mod:`.spec` reads the sweep file into points (each a validated build configuration), :mod:`.point` builds one
point on a worker, :mod:`.run` schedules the points and streams their rows into :mod:`.results`, and
:mod:`.chart` draws the Pareto chart.
"""

from .run import SweepResult, run_sweep
from .spec import load_sweep

__all__ = ["SweepResult", "load_sweep", "run_sweep"]
