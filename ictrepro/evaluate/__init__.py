"""Scoring: the pass@k estimator and (later) benchmark scoring and the lm-eval bridge."""
