"""Training: the SFT warm start of the CPU scale and the Accelerate GRPO loop."""
