"""Pure tensor functions of the algorithm: no I/O, no model objects.

- ``token_stats``: chunked log-probs, Shannon and Rényi-2 entropy, group Jensen–Shannon.
- ``selection``: the registry of token-selection rules (each returns a 0/1 mask).
- ``losses``: group advantages, clipped policy-gradient term, k3 KL, aggregation.
"""
