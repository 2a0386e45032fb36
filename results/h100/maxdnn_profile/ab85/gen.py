"""Write the A/B subspaces of ab85.sh: each layer's current best configuration (the committed
database's, = ../after_configs.json) with REG_USAGE_LEVEL 5 and 10; the 128 x 128 / BK=32 / 8 x 8
block on every layer (SPLIT_K 1, 2) with both levels; the 128 x 128 / BK=16 / 16 x 8 block on
every layer with MIN_BLOCKS 1 and 3. Run from this directory: python3 gen.py"""

import json

best = json.load(open("../after_configs.json"))
groups = {}
for shape, cfg in best.items():
    groups.setdefault(json.dumps(cfg, sort_keys=True), []).append(shape)


def toml(name, description, values):
    lines = [f'description = "{description}"', "[maxdnn]"]
    lines += [f"{k} = {json.dumps(v if isinstance(v, list) else [v])}" for k, v in values.items()]
    open(f"{name}.toml", "w").write("\n".join(lines) + "\n")


shapes = {}
for i, (cfg, members) in enumerate(sorted(groups.items())):
    toml(f"best{i}", "A/B: a current best config, ptxas register-usage level 5 / 10",
         {**json.loads(cfg), "REG_USAGE_LEVEL": [5, 10]})
    shapes[f"best{i}"] = members
common = dict(BM=128, BN=128, DOUBLE_BUFFER=2, VEC=4, FMA_ORDER=1, BYTE_OFFSETS=1)
toml("wide", "A/B: 128 x 128 / BK=32 / 8 x 8 on every layer, level 5 / 10",
     {**common, "BK": 32, "TM": 8, "TN": 8, "MIN_BLOCKS": 1, "SPLIT_K": [1, 2],
      "REG_USAGE_LEVEL": [5, 10]})
toml("w16x8", "A/B: 128 x 128 / BK=16 / 16 x 8 on every layer, 2 or 3 blocks per SM",
     {**common, "BK": 16, "TM": 16, "TN": 8, "MIN_BLOCKS": [1, 3], "SPLIT_K": 1,
      "REG_USAGE_LEVEL": 5})
every = list(best)
shapes["wide"] = shapes["w16x8"] = every
json.dump(shapes, open("shapes.json", "w"), indent=1)
