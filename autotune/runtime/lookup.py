"""The plan choice: which stored configuration of which family serves a shape (no GPU needed).

The one rule, used by the runtime (`dispatch`) and the export (`autotune.export.plans`), from the
store only, for one device and timing protocol:

1. A stored shape: its stored bests (each family's fastest verified configuration), of the
   families that can compute the call (`callable_family`), ranked by their expected time per
   call, then by family name. For a call that fuses an epilogue, a family's best measured with
   that epilogue fused (tune_model tunes so) stands in for its plain one; a family measured on
   the shape only with other epilogues fused (tune_model tunes a layer only as the model calls
   it) is offered with the fastest of those, which counts that epilogue's work against it.
2. A shape with nothing stored: the families that can compute it, in the order
   `ranking.by_evidence` gives from what the store says about each family on similar shapes
   of the same dtype and layout, as rule 1 has them (its measured time per call relative to
   the fastest family's there, weighted by the shapes' nearness in the features that decide
   which family is fast: filter size, 1x1-ness, stride, C, F, pixels); each family's best at
   the nearest stored shape it was measured on (the transfer strategy's log-shape distance)
   made valid for this shape as the transfer strategy makes its seeds valid (the nearest valid
   configuration in the space's coordinates). First every family's nearest, in that order;
   then each family's farther ones. The export serves stored shapes only and never takes this step.

A call names its tensors' storage type and layout and whether TF32 is allowed (calls.Request):
rules 1 and 2 then run over every problem that may serve it (each dtype the request allows, in
either layout), all ranked together, a plan in the other layout than the call's tensors paying
for the copies of the input, the filters and the output (calls.layout_copy_bytes), and a plan
of a family that does not fuse the call's epilogue (its bias) for a pass over the output
(calls.epilogue_pass_bytes), and, for a call whose padded input can be read in place (the
padded problem is among those that may serve it), a pre-padded plan for the padding copy
(calls.padding_copy_bytes), priced as below (pricing.call_costs). Rule 2 ranks each such
problem's first choice together (by its time scaled by the two shapes' FLOPs), then the rest
problem by problem.

A caller tries the choices in turn and takes the first it can use (the runtime: one that
compiles and fits the device; the export: one the C++ tree can launch).

The expected time per call is the stored median plus the work the plan does outside the timed
region on every call: stored times count the timed run only, and a plan that also converts
layouts (maxdnn's CHWN setup and finish) or copies a buffer into constant memory pays for that
on every call, in the runtime and in the exported C++ tree alike. That work is priced at the
device's measured copy bandwidth (a ceiling the store keeps). Without that ceiling such work
cannot be priced: plans rank first by how many of their costs are unknown, then by the sum of
the known ones, so that a plan with conversions ranks after every plan without, and among plans
that all pay the same unpriced copies (every family reads NHWC, the call is NCHW) the fastest
run still wins.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from autotune.families import FAMILIES, Family
from autotune.model.parsing import problem_from_dict
from autotune.model.problem import ConvProblem, ProblemError
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.space import BoundSpace, Config, DeviceLimits
from autotune.runtime.calls import Request
from autotune.runtime.choice import Choice, callable_family, rank
from autotune.runtime.pricing import call_costs, untimed_ms
from autotune.runtime.ranking import Ranking, Table, Timed, by_evidence
from autotune.store.campaigns import shipped_best
from autotune.strategies.local import Coordinates
from autotune.strategies.transfer import shape_distance

MISS_POLICIES = ("nearest", "tune", "error")


class LookupMiss(LookupError):
    """Nothing stored can serve the shape (the message says why)."""


# A miss whose shapes the store measured only with a kernel's previous code.
OLDER_CODE = (
    "of a previous version of the kernels' code, which changed since: `autotune remeasure` "
    "times them with the current code, without searching again"
)


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored best: a family's fastest verified configuration of one shape."""

    family: str
    config: Config
    time_ms: float
    gflops: float = math.nan


@dataclass(frozen=True, slots=True)
class Refusal:
    """A stored best that cannot serve a shape, and why."""

    family: str
    reason: str


class Catalogue:
    """A device's stored best configurations of 2D convolutions under one timing protocol,
    read from the store once; `candidates` answers per shape from memory (binding a space only for
    a shape with nothing stored). Rows of families outside `families` are kept, and refused.
    `ranking` orders the families for a shape with nothing stored (rule 2; another rule only to
    compare rules, as `autotune bench plan-choice` does)."""

    def __init__(
        self,
        rows: Iterable[tuple[ConvProblem, Stored]],
        copy_gbps: float | None = None,
        families: Mapping[str, Family] | None = None,
        ranking: Ranking = by_evidence,
        older: Iterable[str] = (),
    ) -> None:
        self.families = dict(FAMILIES if families is None else families)
        # Plain problems' keys stored only as measurements of a kernel's previous code, which
        # a miss names: `autotune remeasure` times them again, where tuning would search anew.
        self.older = frozenset(older)
        self.copy_gbps = copy_gbps
        self.ranking = ranking
        self.problems: dict[str, ConvProblem] = {}
        self.best: dict[str, list[Stored]] = {}
        # Per plain problem's key, the keys of its sizes measured with an epilogue fused.
        self.fused: dict[str, list[str]] = {}
        for problem, stored in rows:
            self.problems[problem.key] = problem
            self.best.setdefault(problem.key, []).append(stored)
            plain = replace(problem, epilogue="").key
            if problem.epilogue and problem.key not in self.fused.get(plain, ()):
                self.fused.setdefault(plain, []).append(problem.key)

    @classmethod
    def from_store(
        cls,
        store,
        device: str,
        protocol: int = TIMING_PROTOCOL,
        families: Mapping[str, Family] | None = None,
    ) -> Catalogue:
        """What `store` holds for `device` (its name, as the store files it) and `protocol`,
        over the best configurations shipped for it (package data, store/campaigns.py): the
        store's own best of a (family, shape) replaces the shipped one. Shipped rows of other
        code than the family's current are left out, as the store's reads leave out theirs."""
        frame = store.best(device=device, kind="conv2d", protocol=protocol)
        known = FAMILIES if families is None else families
        shipped = [
            r
            for r in shipped_best(device, protocol)
            if r["family"] in known and r.get("kernel_digest") == known[r["family"]].kernel_digest()
        ]
        columns = ("family", "shape", "config", "time_ms", "gflops")
        rows, mine = [], set()
        for family, shape, config, time_ms, gflops in [
            *zip(*(frame[c] for c in columns), strict=True),
            *((*(r[c] for c in columns[:4]), r.get("gflops", math.nan)) for r in shipped),
        ]:
            try:
                values = json.loads(shape) if isinstance(shape, str) else shape
                problem = problem_from_dict(values, "conv2d")
            except (ProblemError, TypeError, ValueError):
                continue  # a row this version cannot read serves nothing
            if (family, problem.key) in mine:
                continue  # shipped, and the store has its own
            mine.add((family, problem.key))
            config = Config.from_json(config)
            rows.append((problem, Stored(family, config, float(time_ms), float(gflops))))
        ceilings = store.ceilings(device=device, protocol=protocol)
        copy = ceilings[ceilings["name"] == "copy_bandwidth"]["value"]
        older = []
        for values in store.older_code_shapes(device, "conv2d", protocol):
            try:
                older.append(replace(problem_from_dict(values, "conv2d"), epilogue="").key)
            except (ProblemError, TypeError, ValueError):
                continue  # a row this version cannot read
        return cls(rows, float(copy.iloc[0]) if len(copy) else None, families, older=older)

    def rows(self) -> Iterator[tuple[ConvProblem, Stored]]:
        """Every stored best it holds, as it was given."""
        for key, stored in self.best.items():
            yield from ((self.problems[key], s) for s in stored)

    # -- one shape ---------------------------------------------------------------------------

    def stored(self, problem: ConvProblem, epilogue: str = "") -> list[Choice]:
        """Every stored best of this very shape that can serve it, as choices for it, best
        first (rule 1). For a call that fuses `epilogue`, a family's best measured with it
        fused (tune_model tunes so) stands in for its plain best: a configuration fast on the
        plain problem can be slow with the epilogue in its store."""
        offers = (self._offer(s, problem, m) for s, m in self._rows(problem, epilogue))
        return sorted((o for o in offers if isinstance(o, Choice)), key=rank)

    def refusals(self, problem: ConvProblem) -> list[Refusal]:
        """Why each other stored best of this very shape cannot serve it, fastest first."""
        offers = (self._offer(s, problem, m) for s, m in self._rows(problem))
        return [o for o in offers if isinstance(o, Refusal)]

    def nearest(self, problem: ConvProblem, limits: DeviceLimits) -> Iterator[Choice]:
        """For a shape with nothing stored (rule 2): the families in the catalogue's ranking's
        order, each one's best at the nearest stored shape it was measured on made valid for
        `problem`; then each family's bests at farther shapes (skipped where none is valid)."""
        table = self.table(problem)
        streams = [
            self._borrowed(f, problem, limits, table)
            for f in self.ranking(problem, table, self._untimed_here(problem, table))
        ]
        for stream in streams:  # lazily: a caller mostly takes the first, binding one space
            first = next(stream, None)
            if first is not None:
                yield first
        for stream in streams:
            yield from stream

    def table(self, problem: ConvProblem) -> Table:
        """What rule 2 ranks families from: per other stored shape of `problem`'s dtype and
        layout, with `problem`'s epilogue, the stored bests there as rule 1 has them (fused
        ones included) of the families that can also compute `problem`."""
        table: dict[str, tuple[ConvProblem, dict[str, Timed]]] = {}
        serve = {n for n, f in self.families.items() if callable_family(f, problem) is None}
        for shape in self.problems.values():
            if (shape.dtype, shape.layout) != (problem.dtype, problem.layout):
                continue  # a bf16 or NHWC plan never serves an fp32 NCHW call (nor the reverse)
            here = replace(shape, epilogue=problem.epilogue)
            if here.key == problem.key or here.key in table:
                continue
            times = {  # measured_on: "" for the shape itself, else the fused problem's key
                c.family: Timed(
                    c.time_ms, c.untimed_ms, "" if c.measured_on == here.key else c.measured_on
                )
                for c in self.stored(here)
                if c.family in serve
            }
            if times:
                table[here.key] = (here, times)
        return table

    def _measured(self, key: str, family: str, timed: Timed) -> tuple[Stored, ConvProblem]:
        """The stored best a table's entry stands for, and the problem it was measured on."""
        measured = timed.measured_on or key
        stored = next(s for s in self.best[measured] if s.family == family)
        return stored, self.problems[measured]

    def _untimed_here(self, problem: ConvProblem, table: Table) -> dict[str, float]:
        """Each family's per-call work outside the timed region on `problem`, with its best
        configuration at the nearest stored shape (its work there where that cannot plan it)."""
        nearest = sorted((shape_distance(problem, p), key) for key, (p, _) in table.items())
        here: dict[str, float] = {}
        for _, key in nearest:
            for family, timed in table[key][1].items():
                if family not in here:
                    s, measured = self._measured(key, family, timed)
                    made = self._offer(s, problem, measured)
                    here[family] = made.untimed_ms if isinstance(made, Choice) else timed.untimed_ms
        return here

    def _borrowed(
        self, family_name: str, problem: ConvProblem, limits: DeviceLimits, table: Table
    ) -> Iterator[Choice]:
        """The family's stored bests, nearest shape first (the transfer strategy's distance),
        each made valid for `problem` (skipped where none is)."""
        family = self.families[family_name]
        coords = _coordinates(family, problem, limits)
        if coords is None:
            return
        shapes = sorted(
            (shape_distance(problem, p), key) for key, (p, times) in table.items()
            if family_name in times
        )  # fmt: skip
        for _, key in shapes:
            s, neighbour = self._measured(key, family_name, table[key][1][family_name])
            near = coords.nearest(family.complete(s.config))
            if near is None:
                continue
            made = self._offer(replace(s, config=near), problem, neighbour)
            if isinstance(made, Choice):
                yield made

    def candidates(
        self, problem: ConvProblem, limits: DeviceLimits, nearest: bool = True
    ) -> Iterator[Choice]:
        """Every choice in order of preference: this shape's stored bests, then (with
        `nearest`, and only when none is stored) the made-valid bests of the nearest shapes. A
        caller tries them in turn until one compiles and fits the device."""
        stored = self.stored(problem)
        yield from stored
        if nearest and not stored:
            yield from self.nearest(problem, limits)

    def for_call(
        self, sizes: ConvProblem, request: Request, limits: DeviceLimits, nearest: bool = True
    ) -> Iterator[Choice]:
        """Every choice for a call of these sizes and this request, in order of preference:
        the stored bests of every problem that may serve it, ranked together (a plan in the
        other layout than the call's paying for the copies); with `nearest`, and only when none
        is stored, rule 2's choices: each problem's first ranked together (by time scaled by
        FLOPs), then the rest problem by problem."""
        problems = request.problems(sizes)
        stored = sorted(
            (self._priced(c, request) for p in problems for c in self.stored(p, request.epilogue)),
            key=rank,
        )
        yield from stored
        if not nearest or stored:
            return
        found = [self.nearest(p, limits) for p in problems]
        heads = [(next(choices, None), choices) for choices in found]
        heads = sorted(
            ((self._priced(c, request), rest) for c, rest in heads if c is not None),
            key=lambda h: self._scaled_rank(h[0]),
        )
        yield from (head for head, _ in heads)
        for _, rest in heads:
            yield from (self._priced(c, request) for c in rest)

    def stored_for(self, sizes: ConvProblem, request: Request) -> bool:
        """Whether any problem that may serve the call has a stored best that can."""
        return any(self.stored(p) for p in request.problems(sizes))

    def _priced(self, choice: Choice, request: Request) -> Choice:
        family = self.families.get(choice.family)
        costs = call_costs(choice.problem, family, request, self.copy_gbps)
        return replace(choice, **costs) if costs else choice

    def _scaled_rank(self, choice: Choice) -> tuple[int, float, str]:
        """A borrowed choice's rank on the call's shape: its time where it was measured,
        scaled by the two shapes' FLOPs, plus what the call pays besides."""
        measured = self.problems.get(choice.measured_on, choice.problem)
        scaled = choice.time_ms * choice.problem.flops / measured.flops
        return (*choice.costs(scaled), choice.family)

    def miss_reason(self, problem: ConvProblem, on_miss: str) -> str:
        if problem.key in self.best:
            return f"no stored configuration of {problem.key} can be called at run time"
        if replace(problem, epilogue="").key in self.older:
            return f"the store's verified configurations of {problem.key} are all {OLDER_CODE}"
        if on_miss == "tune":
            return f"tuning {problem.key} stored no verified configuration"
        if not self.problems:
            if self.older:
                return f"the store's verified 2D convolutions on this device are all {OLDER_CODE}"
            return "the store holds no verified 2D convolution for this device and protocol"
        if on_miss == "error":
            return f"nothing stored for {problem.key} (on_miss='error')"
        return f"no stored shape's configuration can be made valid for {problem.key}"

    # -- helpers -----------------------------------------------------------------------------

    def _rows(self, problem: ConvProblem, epilogue: str = "") -> list[tuple[Stored, ConvProblem]]:
        """The stored bests of `problem` with the problem each was measured on: per family,
        the one measured with `epilogue` fused where there is one, else the plain one, else
        the fastest measured with another epilogue fused (tune_model tunes a model's layers
        only as the model calls them; that measurement counts the other epilogue's work
        against it)."""
        rows = {s.family: (s, problem) for s in self.best.get(problem.key, [])}
        if epilogue:
            fused = replace(problem, epilogue=epilogue)
            rows.update({s.family: (s, fused) for s in self.best.get(fused.key, [])})
        for key in self.fused.get(problem.key, ()):  # a plain problem's fused measurements
            for s in self.best[key]:
                held = rows.get(s.family)
                other = held is not None and held[1].epilogue not in ("", epilogue)
                if held is None or (other and s.time_ms < held[0].time_ms):
                    rows[s.family] = (s, self.problems[key])
        return sorted(rows.values(), key=lambda r: (r[0].time_ms, r[0].family))

    def _offer(self, s: Stored, problem: ConvProblem, measured: ConvProblem) -> Choice | Refusal:
        family = self.families.get(s.family)
        if family is None:
            return Refusal(s.family, f"family {s.family!r} is not among the families given")
        why = callable_family(family, problem)
        if why is not None:
            return Refusal(s.family, why)
        config = family.complete(s.config)
        try:
            plan = family.plan(problem, config)
        except (KeyError, ValueError) as err:  # a config this version's family no longer reads
            return Refusal(s.family, f"its plan cannot be built here: {err}")
        extra = untimed_ms(family, problem, plan, self.copy_gbps)
        return Choice(family.name, config, problem, measured.key, s.time_ms, extra, s.gflops)


def resolve(
    catalogue: Catalogue,
    problem: ConvProblem,
    limits: DeviceLimits,
    on_miss: str,
    tune: Callable[[list[ConvProblem]], Catalogue] | None = None,
    request: Request | None = None,
) -> tuple[Catalogue, Iterator[Choice]]:
    """The miss policies, for a call of `problem`'s sizes and `request` (without one: exactly
    `problem`'s dtype and layout). A call with stored bests gets them whatever the policy. Else
    "nearest" gets the nearest shapes' bests made valid, "error" nothing, and "tune" calls
    `tune(problems)` (which tunes and stores every problem that may serve the call, and
    returns the catalogue read again), then gets what is stored now. Returns the catalogue in
    use and the choices, best first; no choice is a LookupMiss for the caller, whose reason
    catalogue.miss_reason gives."""
    if on_miss not in MISS_POLICIES:
        raise ValueError(f"on_miss must be one of {', '.join(MISS_POLICIES)}, not {on_miss!r}")
    if request is None:
        request = Request.exactly(problem)
        problem = replace(problem, dtype=request.dtypes[0], layout=request.layout)
    if on_miss == "tune" and not catalogue.stored_for(problem, request):
        if tune is None:
            raise ValueError("on_miss='tune' needs a way to tune")
        catalogue = tune(list(request.problems(problem)))
    return catalogue, catalogue.for_call(problem, request, limits, on_miss == "nearest")


def _coordinates(family: Family, problem: ConvProblem, limits: DeviceLimits) -> Coordinates | None:
    if callable_family(family, problem) is not None:
        return None
    space: BoundSpace = family.load_space().bind(family.space_fields(problem), limits)
    return Coordinates(space) if len(space) else None


__all__ = [
    "Catalogue",
    "LookupMiss",
    "MISS_POLICIES",
    "Refusal",
    "Stored",
    "resolve",
]
