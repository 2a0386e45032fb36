"""How long the GPU takes to come back to its top clock after load, and what NVML says meanwhile.

Session 63 found a protocol-2 measurement started half a second after 2 s of back-to-back load
14-17% slower (1,651-1,848 MHz) than the same measurement from rest (1,980 MHz). Before asking
the timer to wait for a rested GPU, this measures what to wait for. Each trial: rest --rest
seconds, run cuDNN's convolution back to back for --load seconds, stay idle for a delay while
NVML is read every 10 ms, then time the convolution by protocol 2 (autotune's timer, the SM clock
sampled every 2 ms). The row gives NVML's last readings before the timed runs, so that a reading
that predicts a slow measurement can be chosen; --trace writes every idle series as JSON.

    python3 rest.py --shape N=12,K=3,C=1024,F=1024,B=128 --dtype tf32 [--load 2] \
        [--delays 0,0.25,0.5,1,2,3] [--trace trace.json] > rest.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from autotune.gpu.observe import Watch, nvml
from autotune.gpu.session import GpuSession, TimingPolicy
from autotune.gpu.torch_conv import TORCH_DTYPES, cudnn_settings
from autotune.model.observe import SM_CLOCK_MHZ, SM_CLOCK_MIN_MHZ, Observe

CAPS = (
    "SwPowerCap",
    "HwSlowdown",
    "SwThermalSlowdown",
    "HwThermalSlowdown",
    "HwPowerBrakeSlowdown",
)


class Nvml:
    """The readings a rest rule could use: average and instantaneous power, SM clock, the clock
    event reasons, temperature."""

    def __init__(self, device) -> None:
        self.n = nvml()
        self.h = self.n.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)
        self.reasons = (
            getattr(self.n, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or self.n.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        self.bits = {}
        for a in dir(self.n):
            if a.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason")):
                v = getattr(self.n, a)
                if isinstance(v, int) and "All" not in a and "None" not in a and v:
                    self.bits.setdefault(v, a.split("Reason")[-1])
        self.instant = getattr(self.n, "NVML_FI_DEV_POWER_INSTANT", None)

    def limits(self) -> dict:
        n, h = self.n, self.h
        out = {"max_sm_mhz": n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)}
        for name, f in (
            ("app_sm_mhz", lambda: n.nvmlDeviceGetApplicationsClock(h, n.NVML_CLOCK_SM)),
            ("power_limit_w", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3),
            ("slowdown_c", lambda: n.nvmlDeviceGetTemperatureThreshold(h, 1)),
        ):
            try:
                out[name] = f()
            except n.NVMLError as err:
                out[name] = str(err)
        return out

    def read(self) -> dict:
        n, h = self.n, self.h
        bits = self.reasons(h)
        out = {
            "power_w": n.nvmlDeviceGetPowerUsage(h) / 1e3,
            "sm_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            "temp_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
            "reasons": [name for bit, name in self.bits.items() if bits & bit],
        }
        if self.instant is not None:
            try:
                v = n.nvmlDeviceGetFieldValues(h, [self.instant])[0]
                out["instant_w"] = v.value.uiVal / 1e3 if v.nvmlReturn == 0 else None
            except n.NVMLError:
                out["instant_w"] = None
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, help="N=..,K=..,C=..,F=..,B=..[,stride=..]")
    ap.add_argument("--dtype", default="tf32")
    ap.add_argument("--load", type=float, default=2.0)
    ap.add_argument("--rest", type=float, default=5.0)
    ap.add_argument("--delays", default="0,0.1,0.25,0.5,0.75,1,1.5,2,3")
    ap.add_argument("--trace")
    args = ap.parse_args()

    f = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    stride = f.get("stride", 1)
    size = (f["N"] - 1) * stride + f["K"]
    cudnn_settings(torch, args.dtype)
    dt = getattr(torch, TORCH_DTYPES[args.dtype])
    x = torch.rand(f["B"], f["C"], size, size, device="cuda").to(
        dt, memory_format=torch.channels_last
    )
    w = torch.rand(f["F"], f["C"], f["K"], f["K"], device="cuda").to(
        dt, memory_format=torch.channels_last
    )

    def run() -> None:
        torch.nn.functional.conv2d(x, w, stride=stride)

    session = GpuSession(0)
    nv = Nvml(session.device)
    run()
    session.sync()

    def load(seconds: float) -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(20):
                run()
            session.sync()

    def probe() -> dict:
        with Watch(Observe(clocks=True, interval_s=0.002), session.device) as watch:
            samples = session.time_runs(run, TimingPolicy())
        r = dict(watch.readings()["observations"])
        return {
            "ms": statistics.median(samples),
            "s": sum(samples) / 1e3,
            "mhz": r.get(SM_CLOCK_MHZ),
            "min_mhz": r.get(SM_CLOCK_MIN_MHZ),
        }

    print(f"<!-- {args.shape} {args.dtype}: {json.dumps(nv.limits())} -->")
    time.sleep(args.rest)
    before = nv.read()
    rested = [probe() for _ in range(3)]
    ref = statistics.median(p["ms"] for p in rested)
    print(
        f"<!-- from rest ({json.dumps(before)}): "
        + ", ".join(f"{p['ms']:.4f} ms at {p['mhz']:.0f} MHz" for p in rested)
        + " -->"
    )
    print(
        "| load s | idle s | W (NVML average) | W (instant) | SM MHz | °C | reasons | ms |"
        " / rest | its SM MHz | its min |\n"
        "|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|"
    )
    traces = []
    for delay in (float(d) for d in args.delays.split(",")):
        time.sleep(args.rest)
        load(args.load)
        start = time.perf_counter()
        trace = []
        while True:
            t = time.perf_counter() - start
            trace.append({"t": round(t, 4), **nv.read()})
            if t >= delay:
                break
            time.sleep(min(0.01, max(0.0, delay - t)))
        p = probe()
        last = trace[-1]
        inst = last.get("instant_w")
        print(
            f"| {args.load:g} | {delay:g} | {last['power_w']:.0f} | "
            f"{inst if inst is None else f'{inst:.0f}'} | {last['sm_mhz']} | {last['temp_c']} | "
            f"{', '.join(r for r in last['reasons'] if r in CAPS) or '-'} | {p['ms']:.4f} | "
            f"{p['ms'] / ref:.3f} | {p['mhz']:.0f} | {p['min_mhz']:.0f} |",
            flush=True,
        )
        traces.append({"load_s": args.load, "delay_s": delay, "probe": p, "trace": trace})
    if args.trace:
        with open(args.trace, "w") as fh:
            json.dump(traces, fh)


if __name__ == "__main__":
    main()
