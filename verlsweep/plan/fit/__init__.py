"""The planner's constants fitted to what was measured: reported numbers of the known points (points)
and of an MLflow experiment's trials (refit) for the throughput and memory constants (measured_fit), and
traces of every model group for the analytic trainer formula (trace_fit). Both fits are one least-squares
routine (least_squares); both write a calibration file through one writer that keeps its comments
(calibration_file).

May import: verlsweep.common, verlsweep.command (to compose a point or a trial again), verlsweep.plan.trace
and verlsweep.plan.predictor.
"""
from verlsweep.plan.fit.measured_fit import FitResult, Sample, fit, informed, predict_sample

__all__ = ["FitResult", "Sample", "fit", "informed", "predict_sample"]
