"""The resource models' fitted coefficients, family -> kernel -> "lut"/"ff" -> feature -> weight, read
from ``coefficients.json`` beside this module.

``benchmarks/calibrate_resources.py`` writes that file (and ``benchmarks/calibration/fit.json``, beside
the calibration designs) from the training part of the stored Yosys 0.70 calibration designs: data
only, never edited by hand.
"""

import json
from importlib import resources

COEFFICIENTS: dict[str, dict[str, dict[str, dict[str, float]]]] = json.loads(
    resources.files(__package__).joinpath("coefficients.json").read_text())
