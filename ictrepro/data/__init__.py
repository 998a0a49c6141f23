"""Problem records, the synthetic task suites of the CPU scale, and (later) benchmark loaders."""
