"""Registers a Triton flash-attention program spills (Triton 3.9, sm_90a) and what the spill costs its loop."""

# ptxas's spill stores of the pipelined flash loop, B=1 H=32 S=2048 bf16 (Triton 3.9 cubins, cuobjdump -res-usage):
# D=128 BLOCK_M 128 on 4 warps: BLOCK_N 128 255 registers + 664 bytes (166 registers), BLOCK_N 64 255 + 128 (32);
# D=64 BLOCK_M 128 BLOCK_N 128 on 4 warps 255 + 72 (18); none at 8 warps (226 registers at 128 x 128, D=128), nor
# at BLOCK_M 64 (BLOCK_N 128 236, 64 160) or BLOCK_N 32 (238). What one thread holds across the loop (held): the
# score tile S (BLOCK_M x BLOCK_N fp32), its probabilities P (16-bit, half the registers), the output O (BLOCK_M x D
# fp32) and ~64 of addresses and row statistics: 384 / 288 / 320 at the three that spill, 224 / 240 / 176 / 224 at
# those that do not. The small spills cost nothing the devices show (D=128 128 x 64 on 4 warps ran 0.82-1.14x the
# model of its episodes' other configs, H100 and H200; D=64 128 x 128 1.13x): up to SPILL_FREE registers over 255
# are stored once, outside the key loop. 128 x 128 at D=128 on 4 warps ran 1.19-1.68x (geomean 1.46: held out
# s61717, s92442, s95252; stored H200 s50505, s5151), its 97 registers past SPILL_FREE reloaded every key block.
SPILL_FREE = 32
SPILL_REGS = 215     # registers past SPILL_FREE that double the loop's time (1.45x at 97)


def held(bm: int, bn: int, d: int, threads: int) -> int:
    """Registers a thread holds across the flash loop: S, P, O and ~64 more (the table above)."""
    return 64 + (bm * bn * 3 // 2 + bm * d) // threads


def spill_scale(bm: int, bn: int, d: int, threads: int) -> float:
    """The compute side's scale for what spills past ptxas's 255 registers a thread into the loop (local memory)."""
    return 1.0 / (1.0 + max(0, held(bm, bn, d, threads) - 255 - SPILL_FREE) / SPILL_REGS)
