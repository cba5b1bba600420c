// Filled in by the JIT / measurement work (issue 3).
