"""The training run's evaluators under their former module name, only for
lostcities/train.py's ``build_evaluator`` import; delete this module once train.py imports
them from lostcities.eval.evaluators (nothing else imports it)."""

from lostcities.eval.evaluators import LostCitiesEvaluator, SmallGameEvaluator

__all__ = ["LostCitiesEvaluator", "SmallGameEvaluator"]
