"""The facts a harness row on a real NPU2 records (npu_kernels.provenance.harness_provenance: a named device and a probed
toolchain, no stand-in marker), for tests that build hardware rows by hand. Without them a harness row is
`unattested`, and the registry never shows it as verified."""

NPU2_TOOLCHAIN = {"executor": "mlir-air", "mlir_air_commit": "e972f2942" + "0" * 31, "aie_opt": "aie-opt 1.0",
                  "air_opt": "air-opt 1.0", "xrt_smi": "xrt-smi 2.19", "peano": "clang version 22.0.0"}
NPU2_PROVENANCE = {"device": "NPU Strix", "toolchain": NPU2_TOOLCHAIN}


def npu2_provenance(source: str, kw: dict) -> dict:
    """`kw` with an NPU2 device and toolchain in its provenance when `source` is a harness run and none was given."""
    if source in ("harness", "diagnosis"):
        kw = {**kw, "provenance": {**NPU2_PROVENANCE, **kw.get("provenance", {})}}
    return kw

# what a command the tool ran on that machine records of where it ran (npu_kernels.mlir_air.checkout.where_it_ran):
# a working directory, the paths it named, none of them a stand-in; without it such a row is `unattested`
NPU2_RAN = {"ran": {"cwd": "/npu-host/mlir-air", "paths": [], "standin": []}}
