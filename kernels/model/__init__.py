"""The model: resolved config, architecture check, weights, the decoder pipeline built from leaf kernels,
the HF reference, SmolLM2's conversion, prompt sets, the kernel x shape plan, and the comparisons the
Phase 2-7 gates measure with (`compare`)."""
