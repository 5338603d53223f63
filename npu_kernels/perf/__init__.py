"""The NPU2 performance model: leaf-kernel costs, a deployment's dispatch plan, end-to-end prediction.

  kernel_model   latency of one leaf-kernel launch from its mechanics (linear in fitted constants)
  constants      NPU2 peak and the fitted constants, each with its meaning and evidence
  fit            NNLS fit of those constants on the registry rows, leave-one-out accuracy
  anchors        the measured rows (anchors.toml) and the Llama-3.2-1B profile (profile_llama32_1b.toml)
  dispatch       which launches form which XRT/ELF call, with BO categories, under the switches
  host           XRT-call and host-side constants derived from the Llama-3.2-1B profile
  predict        Prediction: TTFT, ms/token, per-ELF / per-kernel breakdown, text table, PNG chart
  curve          prefill length and decode context as axes: TTFT / prefill tokens/s against padded prefill length,
                 decode tokens/s against context, with the bounds of each axis; tables, PNG, curve comparison
Everything is a pure, deterministic function of its inputs.
"""

# The version of this performance model: bump it when a fitted constant, a launch rule or the dispatch plan
# changes a modelled figure (npu_kernels.toolchain records it beside every modelled PerformanceMeasured / KernelVerified).
PERF_MODEL_VERSION = "npu2-perf/2"

from npu_kernels.perf.constants import NPU2_PEAK_BF16_FLOPS  # noqa: E402
from npu_kernels.perf.dispatch import SWITCHES, dispatch_plan
from npu_kernels.perf.kernel_model import kernel_latency_s, modelled_kernel_figures
from npu_kernels.perf.predict import Prediction, predict, render_table, write_png

__all__ = ["NPU2_PEAK_BF16_FLOPS", "PERF_MODEL_VERSION", "SWITCHES", "Prediction", "dispatch_plan", "kernel_latency_s",
           "modelled_kernel_figures", "predict", "render_table", "write_png"]
