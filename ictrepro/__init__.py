"""ictrepro: reproduce ICT (Independent Combinatorial Tokens) against GRPO, 20-Entropy and STAPO."""

__version__ = "0.1.0"
