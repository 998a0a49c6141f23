"""Problem records, the synthetic task suites of the CPU scale, and the benchmark loaders."""
