"""Scoring: the pass@k estimator, benchmark scoring, aggregation over seeds, the lm-eval bridge."""
