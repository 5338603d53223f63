"""`ledger kernel ...`: the group, `kernel list`, and `kernel run` (a row of handlers.verbs): run one leaf kernel at
one shape and judge it, on the executor's kernel runner (npu_kernels.backends.kernel_runners.make_runner:
npu_kernels.numerics.run.run_kernel in process, mlir-air's harness).

    ledger kernel run gemm --shape M=2048,K=2048,N=2048 [--executor emulated|torch|fp32|mlir-air] [--target npu2|npu1]
                      [--contract bf16-out-low] [--tile tile_m=64,tile_n=128] [--seed 0]
                      [--inputs project|harness] [--json]

--inputs harness draws exactly what mlir-air's harness script draws and compares against its reference
(npu_kernels.numerics.harness_inputs), so the figures are comparable with NPU2's printed `[precision]` line.

Prints a short table (or, with --json, the KernelResult fields); exits 1 when the verdict is FAIL. A bad
shape, an unknown kernel or contract, or an illegal tile is one `Error: ...` line on stderr, exit status 1.
"""

from __future__ import annotations

import click

from handlers.cli.verbs import group_commands
from npu_kernels.numerics.catalog import KERNELS, get_spec


@click.group("kernel")
def kernel() -> None:
    """Leaf kernels: run one at a shape on an executor and judge its full output."""


@kernel.command("list")
def list_cmd() -> None:
    """The leaf kernels, their shape keys and contracts."""
    for name in KERNELS:
        spec = get_spec(name)
        click.echo(f"{name:<16} {','.join(spec.shape_keys):<40} {' | '.join(spec.contracts)}")


for _command in group_commands("kernel"):  # kernel run: a row of handlers.verbs
    kernel.add_command(_command)


commands = [kernel]
