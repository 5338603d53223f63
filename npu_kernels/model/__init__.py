"""The model: resolved config, the architecture description (`description`, the one place a family differs) and
the family adapters that build it from config.json (`families`, the only code that names a family), architecture
check, weights, the decoder pipeline built from leaf kernels, the HF reference, SmolLM2's conversion, prompt sets,
the kernel x shape plan, and the comparisons the Phase 2-7 gates measure with (`compare`)."""
