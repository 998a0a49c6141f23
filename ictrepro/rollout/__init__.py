"""Samplers behind one interface: Hugging Face ``generate`` (CPU/GPU) and vLLM (GPU)."""
