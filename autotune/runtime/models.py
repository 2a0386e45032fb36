"""Whole PyTorch models: collect their convolutions (which model_tuning.py tunes as ordinary
studies), and swap each torch.nn.Conv2d for the tuned layer (an inference-mode BatchNorm after
it folded in), compiled ahead so that the first forward compiles nothing; optimize() returns the
traced copy traced.py makes where one pays (fused epilogues, channels-last inside)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from autotune.model.epilogue import epilogue_name
from autotune.model.problem import ConvProblem
from autotune.runtime.batchnorm import conv_bn_pairs, fold_batchnorm
from autotune.runtime.calls import Call, CallError, Request
from autotune.runtime.lookup import LookupMiss
from autotune.runtime.torch_tensors import STORAGES, autocast_dtype, layout_of
from autotune.runtime.traced import channels_last_copy, fuse_epilogues, to_channels_last


@dataclass(frozen=True, slots=True)
class ModelConv:
    """One convolution module of a model as the example input called it: its name in the model,
    the call's sizes as a problem, and why autotune cannot serve it ("" when it can)."""

    name: str
    problem: ConvProblem | None
    refused: str = ""


def _inputs(example_inputs) -> tuple:
    return example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)


def collect_convolutions(model: torch.nn.Module, example_inputs) -> list[ModelConv]:
    """Every torch.nn.Conv2d the example forward calls, in call order (forward hooks; one
    forward under torch.no_grad)."""
    found: list[ModelConv] = []
    names = {module: name for name, module in model.named_modules()}

    def hook(module, args, _output):
        found.append(_describe(names.get(module, "?"), module, args[0]))

    handles = [
        m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)
    ]
    try:
        with torch.no_grad():
            model(*_inputs(example_inputs))
    finally:
        for handle in handles:
            handle.remove()
    return found


def _describe(name: str, conv: torch.nn.Conv2d, x: torch.Tensor) -> ModelConv:
    why = unsupported(conv)
    if why:
        return ModelConv(name, None, why)
    key = (0, *x.shape, *conv.weight.shape, conv.stride, conv.padding)
    try:
        call = Call.of(key)  # padded where a plan may read the input in place
        return ModelConv(name, call.padded_problem() or call.problem())
    except CallError as err:
        return ModelConv(name, None, str(err))


def unsupported(conv: torch.nn.Conv2d) -> str:
    """Why autotune.Conv2d cannot stand in for `conv` ("" when it can)."""
    if conv.groups != 1:
        return f"groups={conv.groups}"
    if tuple(conv.dilation) != (1, 1):
        return f"dilation={tuple(conv.dilation)}"
    if isinstance(conv.padding, str) or conv.padding_mode != "zeros":
        return f"padding={conv.padding!r} ({conv.padding_mode})"
    for what in ("kernel_size", "stride", "padding"):
        value = tuple(getattr(conv, what))
        if value[0] != value[1]:
            return f"{what}={value} is not square"
    return ""


def optimize(
    model: torch.nn.Module,
    example_inputs=None,
    *,
    database: str | None = None,
    on_miss: str = "nearest",
    fold: bool = True,
    fuse: bool = True,
    channels_last: bool | None = None,
    pool: bool = True,
    runtime_=None,
) -> torch.nn.Module:
    """Swap every torch.nn.Conv2d autotune can serve for autotune.Conv2d (in place), folding an
    inference-mode BatchNorm that only follows it into its weight and bias (the BatchNorm
    becomes an Identity); with `fuse`, return a traced copy in which a ReLU, a residual add or
    both that follow a convolution are applied in its call (fuse_epilogues), else `model`. Run
    the module returned. With `example_inputs`, compile the plans their
    convolutions will run ahead (parallel NVRTC into the disk cache) and prepare them by one
    forward, so that the first forward of the caller compiles and loads nothing; each weight
    is then kept in the memory format its plan reads. `channels_last`: run the activations
    channels-last inside the model (its inputs converted once, 4-D outputs given back in the
    input's format; channels_last_copy), so that plans reading NHWC copy no layout per call;
    None decides from the store for an NCHW example on the GPU (prefers_channels_last).
    With `pool`, every torch.nn.MaxPool2d without dilation, indices or ceil mode becomes an
    autotune.MaxPool2d (in place), whose eager calls on channels-last GPU tensors run the
    runtime's pooling kernel: PyTorch's own NHWC max pooling runs at about a fifth of the copy
    bandwidth. Called inside the forward's torch.autocast("cuda"), it prepares the plans of
    autocast's dtype, which the layers then compute in. `runtime_`: a Runtime of the caller's
    (its own launcher or families) in place of the database's."""
    from autotune.runtime.dispatch import runtime

    rt = runtime(database) if runtime_ is None else runtime_
    # The example's convolutions, collected before the swap: hooks see torch.nn.Conv2d modules,
    # and a forward through swapped layers would prepare (compile) each in turn, one at a time.
    convs = collect_convolutions(model, example_inputs) if example_inputs is not None else []
    run, layers = _swap(model, rt, on_miss, fold, fuse, pool)
    if layers and channels_last is not False:
        x = _inputs(example_inputs)[0] if example_inputs is not None else None
        chosen = channels_last
        if chosen is None:
            chosen = _channels_last_pays(rt, convs, layers, x)
        copy = channels_last_copy(run) if chosen else None
        if copy is not None and x is not None:
            example = (to_channels_last(x), *_inputs(example_inputs)[1:])
            try:
                _prepare(copy, example, rt, layers, convs)
                return copy
            except RuntimeError:
                if channels_last:
                    raise
                # The model needs its own layout somewhere (a view() of a 4-D activation, say):
                # chosen by the store, channels-last is dropped and the model runs as it is.
        elif copy is not None:
            return copy
    if example_inputs is not None and layers:
        _prepare(run, example_inputs, rt, layers, convs)
    return run


def _swap(
    model: torch.nn.Module, rt, on_miss: str, fold: bool, fuse: bool, pool: bool = False
) -> tuple:
    """optimize()'s swap, in place: (the module to run, the autotune layer standing for each
    swapped convolution by its name in `model`, a fused copy where it fuses an epilogue); with
    `pool`, the max poolings autotune.MaxPool2d takes swapped too."""
    from autotune.runtime.torch_layer import Conv2d
    from autotune.runtime.torch_pool import MaxPool2d

    folded = dict(conv_bn_pairs(model)) if fold else {}
    layers: dict[str, Conv2d] = {}
    for name, module in list(model.named_modules()):
        if isinstance(module, torch.nn.Conv2d) and not unsupported(module):
            layer = Conv2d.from_torch(module, on_miss=on_miss, runtime_=rt)
            if name in folded:
                weight, bias = fold_batchnorm(module, _get(model, folded[name]))
                layer._adopt(weight, bias)
                _set(model, folded[name], torch.nn.Identity())
            _set(model, name, layer)
            layers[name] = layer
        elif pool and type(module) is torch.nn.MaxPool2d:
            pooling = MaxPool2d.from_torch(module)
            if pooling is not None:
                _set(model, name, pooling)
    run = model
    if fuse and layers:
        traced, fused = fuse_epilogues(model)
        if traced is not None:
            run = traced
            layers.update(fused)  # each fused layer stands for the one it copies
    return run, layers


def model_epilogues(model: torch.nn.Module, rt) -> dict[str, str]:
    """The epilogue each convolution of `model` calls once optimize()d (folded BatchNorm's
    shift as a bias, a fused ReLU and residual add), by module name; the model unchanged (a
    copy of it on the meta device is swapped)."""
    import copy

    ghost = copy.deepcopy(model).to("meta")
    _, layers = _swap(ghost, rt, "nearest", fold=True, fuse=True)
    return {
        name: epilogue_name(layer.bias is not None, layer.takes_residual, layer.activation)
        for name, layer in layers.items()
    }


def _channels_last_pays(rt, convs: list[ModelConv], layers: dict, x) -> bool:
    """Whether the example (NCHW, on the GPU) is served faster with the activations
    channels-last, as the store prices each convolution's first choice."""
    if x is None or not x.is_cuda or x.dim() != 4 or layout_of(x) != "NCHW":
        return False
    request = _request_of(x)
    device = x.get_device()
    calls = ahead_calls(convs, layers, request)
    in_nchw = [rt.first_choice(sizes, r, device) for sizes, r in calls]
    in_nhwc = [rt.first_choice(sizes, replace(r, layout="NHWC"), device) for sizes, r in calls]
    return prefers_channels_last(in_nchw, in_nhwc)


def prefers_channels_last(in_nchw: Sequence, in_nhwc: Sequence) -> bool:
    """Whether a model's convolutions, each one's first choice priced for a call in NCHW and
    for one in NHWC (choice.Choice, None where nothing serves it), cost less called in NHWC:
    true when some NCHW call pays layout copies and the NHWC calls' summed costs (how many are
    unknown, then the known sum) are lower. Converting the model's input and 4-D outputs once
    is left out: a copy of one activation against two at every convolution."""
    pairs = [(a, b) for a, b in zip(in_nchw, in_nhwc, strict=True) if a is not None]
    if not any(a.layout_ms for a, _ in pairs) or any(b is None for _, b in pairs):
        return False

    def total(choices) -> tuple[int, float]:
        costs = [c.costs() for c in choices]
        return sum(u for u, _ in costs), sum(k for _, k in costs)

    return total(b for _, b in pairs) < total(a for a, _ in pairs)


def _request_of(x: torch.Tensor) -> Request:
    """How the model's first convolution is called with x: under torch.autocast("cuda") in
    autocast's lower precision (optimize() called inside the forward's autocast then prepares
    the plans the forward will run)."""
    storage = STORAGES.get(autocast_dtype(x) or x.dtype, "float32")
    return Request(
        storage,
        layout_of(x) or "NCHW",
        storage == "float32" and bool(torch.backends.cudnn.allow_tf32),
    )


def _prepare(model, example_inputs, rt, layers, convs: list[ModelConv]) -> None:
    """Compile the plans of the example's convolutions (`convs`) ahead, in parallel, then run
    the example once through the swapped model to load and prepare each."""
    x = _inputs(example_inputs)[0]
    request = _request_of(x)
    calls = ahead_calls(convs, layers, request)
    try:
        if x.is_cuda:
            rt.compile_ahead(calls, device=x.get_device())
        with torch.no_grad():
            model(*_inputs(example_inputs))  # prepares every shape: load, launches, workspaces
    except LookupMiss as err:
        raise LookupMiss(
            f"{err}: tune the model's convolutions first (autotune.tune_model, or the command "
            f"`autotune tune-model --model NAME --dtype {request.dtypes[-1]}`)"
        ) from err
    for layer in layers.values():
        _settle_weight(rt, layer)


def ahead_calls(convs: list[ModelConv], layers: dict, request: Request) -> list[tuple]:
    """(problem, request) per convolution the runtime serves, as compile_ahead takes them: a
    layer with a bias (a folded BatchNorm's shift) calls with its epilogue (the bias, and any
    residual and activation fused with it), whose plan is a compile of its own."""
    calls = []
    for conv in convs:
        if conv.problem is not None:
            layer = layers.get(conv.name)
            epilogue = ""
            if layer is not None:
                bias = layer.bias is not None
                epilogue = epilogue_name(bias, layer.takes_residual, layer.activation)
            # Each call's own padding and tail: its problem's plan reads its input in place.
            padded = replace(request, padding=conv.problem.padding, tail=conv.problem.tail)
            calls.append((replace(conv.problem, epilogue=epilogue), padded))
    return calls


def _settle_weight(rt, layer) -> None:
    """Keep the layer's weight in the layout its prepared plans read (no copy per call)."""
    f, c, k, _ = layer.weight.shape
    nhwc = {
        choice.problem.nhwc
        for call, choice in rt.prepared().items()
        if (call.F, call.Cw, call.KH, call.stride, call.padding)
        == (f, c, k, layer.stride, layer.padding)
    }
    if len(nhwc) == 1:
        fmt = torch.channels_last if nhwc.pop() else torch.contiguous_format
        layer._adopt(layer.weight.detach().contiguous(memory_format=fmt), layer.bias)


def _get(model: torch.nn.Module, name: str) -> torch.nn.Module:
    return model.get_submodule(name)


def _set(model: torch.nn.Module, name: str, module: torch.nn.Module) -> None:
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attr, module)


__all__ = [
    "ModelConv",
    "collect_convolutions",
    "optimize",
    "prefers_channels_last",
    "unsupported",
]
