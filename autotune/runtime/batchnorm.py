"""An inference-mode BatchNorm folded into the convolution before it (optimize() swaps the pair
for one autotune layer with the folded weight and bias): which pairs a model has, and the
folded weight and bias."""

from __future__ import annotations

import torch


def fold_batchnorm(conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d) -> tuple:
    """The weight and bias of `conv` followed by inference-mode `bn`, as one convolution."""
    scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
    weight = conv.weight.detach() * scale.view(-1, 1, 1, 1).to(conv.weight.dtype)
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros_like(bn.running_mean)
    bias = (bias - bn.running_mean) * scale + bn.bias.detach()
    return weight, bias.to(conv.weight.dtype)


def conv_bn_pairs(model: torch.nn.Module) -> list[tuple[str, str]]:
    """(conv, batchnorm) module names where the BatchNorm, in inference mode, is the only user
    of the convolution's output and runs on nothing else (a torch.fx trace of the model; none
    when the model cannot be traced)."""
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception:  # any model fx cannot trace: no folding, nothing else changes
        return []
    modules = dict(model.named_modules())
    calls: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or len(node.users) != 1:
            continue
        (user,) = node.users
        conv, bn = modules.get(node.target), modules.get(getattr(user, "target", None))
        if (
            isinstance(conv, torch.nn.Conv2d)
            and user.op == "call_module"
            and isinstance(bn, torch.nn.BatchNorm2d)
            and not bn.training
            and bn.running_mean is not None
            and calls[node.target] == calls[user.target] == 1
            and user.args == (node,)
        ):
            pairs.append((node.target, user.target))
    return pairs


__all__ = ["conv_bn_pairs", "fold_batchnorm"]
