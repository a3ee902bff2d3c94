"""A classic-BPF interpreter for the seccomp filter's instructions, to read the policy of every
machine (aarch64 too) on this one: what the filter answers for a system call, as the kernel
would run it (struct seccomp_data: nr, arch, instruction pointer, six 64-bit arguments)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

LD_W_ABS, JEQ_K, JGT_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x25, 0x35, 0x45, 0x06
MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS


def run(
    program: Sequence[tuple[int, int, int, int]], arch: int, nr: int, args: Sequence[int] = ()
) -> int:
    """The filter's return value for one call (arguments default to 0)."""
    full = [*args, *[0] * (6 - len(args))]
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, 0, *[a & (2**64 - 1) for a in full])
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == LD_W_ABS:
            if k % 4 or k + 4 > len(data):
                raise ValueError(f"load outside struct seccomp_data at {pc}: {k}")
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == RET_K:
            return k
        elif code in (JEQ_K, JGT_K, JGE_K, JSET_K):
            taken = {
                JEQ_K: accumulator == k,
                JGT_K: accumulator > k,
                JGE_K: accumulator >= k,
                JSET_K: accumulator & k != 0,
            }[code]
            pc += jt if taken else jf
        else:
            raise ValueError(f"instruction the interpreter does not know at {pc}: {code:#x}")
        pc += 1
