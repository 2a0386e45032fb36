"""Two variants of kernels/tc_wgmma.cu's mbarrier wait, for code_ab.py: each written as
OUT/NAME/tc_wgmma.cu.

- hint: the try-wait given a suspend-time hint of 50,000 ns, as cuDNN's kernels on ResNet-50's
  7x7 1x1 layers wait (their SASS: a failed TRYWAIT, then `NANOSLEEP.SYNCS 0xc350` and a plain
  phase check); ptxas lowers the hint to that sequence.
- sleep: a failed try-wait followed by `nanosleep.u32 20`, a plain sleep, before the next one.

The kernel's own wait loops on the try-wait alone.

    python3 wait_texts.py OUT
"""

import sys
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[3] / "kernels" / "tc_wgmma.cu"
LOOP = (
    '        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\\n"\n'
    '        "@!done bra WAIT_AGAIN;\\n}\\n" ::"r"(bar),'
)
VARIANTS = {
    "hint": (
        '        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, 50000;\\n"\n'
        '        "@!done bra WAIT_AGAIN;\\n}\\n" ::"r"(bar),'
    ),
    "sleep": (
        '        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\\n"\n'
        '        "@done bra WAIT_DONE;\\n"\n'
        '        "nanosleep.u32 20;\\n"\n'
        '        "bra WAIT_AGAIN;\\n"\n'
        '        "WAIT_DONE:\\n}\\n" ::"r"(bar),'
    ),
}

text = KERNEL.read_text()
if text.count(LOOP) != 1:
    sys.exit("wait_texts.py: the kernel's mbarrier wait is not the loop this script replaces")
for name, loop in VARIANTS.items():
    out = Path(sys.argv[1]) / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "tc_wgmma.cu").write_text(text.replace(LOOP, loop))
    print(out / "tc_wgmma.cu")
