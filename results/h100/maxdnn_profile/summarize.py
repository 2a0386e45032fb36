"""Per-kernel summary of an Nsight Compute export: `ncu -i R --page details --csv` (DETAILS) and
`ncu -i R --page source --csv --print-source sass` (SASS, gzip'd or not), one line per profiled
launch, in the order the driver (drive.py) launched them; SHAPES is the driver's JSON file."""

import collections
import csv
import gzip
import json
import sys

WANT = {
    "Duration": "time",
    "Issue Slots Busy": "issue%",
    "Achieved Occupancy": "occ%",
    "Theoretical Occupancy": "theo%",
    "Registers Per Thread": "regs",
    "Waves Per SM": "waves",
    "Eligible Warps Per Scheduler": "eligible",
    "L1/TEX Cache Throughput": "L1%",
}


def details(path):
    per = collections.defaultdict(dict)
    for r in csv.DictReader(open(path)):
        if r["Metric Name"] in WANT:
            per[int(r["ID"])][WANT[r["Metric Name"]]] = (r["Metric Value"], r["Metric Unit"])
    return [per[i] for i in sorted(per)]


def sass(path):
    opener = gzip.open if path.endswith(".gz") else open
    kernels, hdr = [], None
    for row in csv.reader(opener(path, "rt")):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernels.append([])
        elif row[0] == "Address":
            hdr = row
        else:
            kernels[-1].append(dict(zip(hdr, row, strict=False)))
    out = []
    for ins in kernels:
        ops, stalls = collections.Counter(), collections.Counter()
        excess = 0
        for d in ins:
            words = d["Source"].split()
            op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
            ops[op] += int(d["Instructions Executed"] or 0)
            excess += int(d["L1 Wavefronts Shared Excessive"] or 0)
            for h in hdr:
                if h.startswith("stall_") and not h.endswith("(Not Issued)"):
                    stalls[h[6:]] += int(d[h] or 0)
        out.append((ops, stalls, excess))
    return out


def main(shapes_json, details_csv, sass_csv):
    shapes = list(json.load(open(shapes_json)).items())
    print(
        "| shape | config | time | issue slots busy | FFMA share of issued | FFMA x issue | "
        "LDS share | achieved / theoretical occupancy | waves | smem excess wavefronts | "
        "top stall reasons (share of warp samples) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for (shape, config), d, (ops, stalls, excess) in zip(
        shapes, details(details_csv), sass(sass_csv), strict=True
    ):
        total = sum(ops.values())
        ffma = ops["FFMA"] / total
        issue = float(d["issue%"][0]) / 100
        st = sum(stalls.values())
        top = ", ".join(f"{k} {v / st:.2f}" for k, v in stalls.most_common(5))
        cfg = " ".join(f"{k}={v}" for k, v in sorted(config.items()))
        occupancy = f"{d['occ%'][0]} / {d['theo%'][0]} %"
        print(
            f"| {shape} | {cfg} | {d['time'][0]} {d['time'][1]} | {issue:.3f} | {ffma:.3f} | "
            f"{issue * ffma:.3f} | {ops['LDS'] / total:.3f} | {occupancy} | "
            f"{d['waves'][0]} | {excess} | {top} |"
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
