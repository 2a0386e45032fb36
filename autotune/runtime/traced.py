"""Traced copies of a model with autotune's layers in it (torch.fx; the layer stays one node):
a convolution's following ReLU and residual add folded into its call (fuse_epilogues), and the
activations run channels-last between one conversion of the inputs and one of the outputs
(channels_last_copy). Each copy shares the model's modules and parameters; a model FX cannot
trace gets none."""

from __future__ import annotations

import operator

import torch

# What a ReLU looks like in a traced graph: the module, the function, the method.
_RELU_FUNCTIONS = (torch.relu, torch.relu_, torch.nn.functional.relu)
_ADD_FUNCTIONS = (operator.add, operator.iadd, torch.add)


class _LayerTracer(torch.fx.Tracer):
    """FX's tracer with autotune's layers as leaves: a convolution or a pooling stays one
    call_module node."""

    def is_leaf_module(self, module: torch.nn.Module, name: str) -> bool:
        from autotune.runtime.torch_layer import Conv2d
        from autotune.runtime.torch_pool import MaxPool2d

        return isinstance(module, Conv2d | MaxPool2d) or super().is_leaf_module(module, name)


def _is_relu(node, modules) -> bool:
    if node.op == "call_module":
        return isinstance(modules.get(node.target), torch.nn.ReLU)
    if node.op == "call_function":
        return node.target in _RELU_FUNCTIONS and len(node.args) == 1
    return node.op == "call_method" and node.target in ("relu", "relu_") and len(node.args) == 1


def _is_add(node) -> bool:
    """A plain sum of two tensors (no alpha, no out=)."""
    return (
        node.op == "call_function"
        and node.target in _ADD_FUNCTIONS
        and len(node.args) == 2
        and not node.kwargs
    )


def _through_identities(node, modules):
    """The last node of a chain of single-user Identity modules after `node` (a folded
    BatchNorm leaves one), or `node` itself."""
    while len(node.users) == 1:
        (user,) = node.users
        if user.op == "call_module" and isinstance(modules.get(user.target), torch.nn.Identity):
            node = user
        else:
            break
    return node


def fuse_epilogues(model: torch.nn.Module) -> tuple[torch.fx.GraphModule | None, dict]:
    """A traced copy of `model` (its modules and parameters shared, the model itself unchanged)
    in which each autotune.Conv2d with a bias whose output only feeds a ReLU, a residual add, or
    an add then a ReLU applies them in its own call (`Conv2d.with_epilogue`): conv -> BatchNorm
    -> ReLU and conv -> BatchNorm -> add -> ReLU once the BatchNorm is folded. Returns it and
    the fused layers by the name of the layer each stands for; (None, {}) when FX cannot trace
    the model or nothing fuses."""
    from autotune.runtime.torch_layer import Conv2d

    try:
        graph = _LayerTracer().trace(model)
    except Exception:  # any model fx cannot trace: nothing is fused
        return None, {}
    modules = dict(model.named_modules())
    fused: dict[str, torch.nn.Module] = {}
    standing_for: dict[str, torch.nn.Module] = {}
    for node in list(graph.nodes):
        layer = modules.get(node.target) if node.op == "call_module" else None
        if not isinstance(layer, Conv2d) or layer.bias is None or layer.activation:
            continue
        if len(node.args) != 1 or node.kwargs:
            continue
        end = _through_identities(node, modules)
        if len(end.users) != 1:
            continue
        (user,) = end.users
        residual, last = None, end
        if _is_add(user):
            other = user.args[1] if user.args[0] is end else user.args[0]
            if other is end or not isinstance(other, torch.fx.Node):
                continue
            residual, last = other, user
        relu = None
        if len(last.users) == 1 and _is_relu(next(iter(last.users)), modules):
            relu = next(iter(last.users))
        if residual is None and relu is None:
            continue
        name = f"{node.target}__fused".replace(".", "_")  # a top-level module of the copy
        fused[name] = layer.with_epilogue("relu" if relu is not None else "", residual is not None)
        standing_for[node.target] = fused[name]
        tail = relu if relu is not None else last
        with graph.inserting_before(tail):
            args = (node.args[0],) if residual is None else (node.args[0], residual)
            call = graph.call_module(name, args)
        tail.replace_all_uses_with(call)
        for dead in _chain(node, tail):
            graph.erase_node(dead)
    if not fused:
        return None, {}
    graph.lint()
    # The copy's root: the model's own children, parameters and buffers (shared), and the
    # fused layers beside them.
    root = torch.nn.Module()
    for name, module in model.named_children():
        root.add_module(name, module)
    for name, param in model.named_parameters(recurse=False):
        root.register_parameter(name, param)
    for name, buffer in model.named_buffers(recurse=False):
        root.register_buffer(name, buffer)
    for name, module in fused.items():
        root.add_module(name, module)
    traced = torch.fx.GraphModule(root, graph, class_name=f"{type(model).__name__}Fused")
    return traced.eval() if not model.training else traced, standing_for


def _chain(first, last) -> list:
    """The nodes from `first` to `last` along single users, last first (the order to erase)."""
    nodes = [first]
    while nodes[-1] is not last:
        nodes.append(next(iter(nodes[-1].users)))
    return nodes[::-1]


def channels_last_copy(model: torch.nn.Module) -> torch.fx.GraphModule | None:
    """A traced copy of `model` (modules and parameters shared) that converts each 4-D floating
    input to channels-last once and gives each 4-D output back contiguous when the first input
    was: every layer between runs channels-last (autotune's convolutions return their input's
    memory format, PyTorch's pooling, activations and adds keep it), so plans that read NHWC
    copy nothing per call. None when FX cannot trace the model."""
    try:
        graph = _LayerTracer().trace(model)
    except Exception:  # any model fx cannot trace keeps its layout copies
        return None
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    if not inputs:
        return None
    for node in inputs:
        with graph.inserting_after(node):
            converted = graph.call_function(to_channels_last, (node,))
        others = [user for user in node.users if user is not converted]
        for user in others:
            user.replace_input_with(node, converted)
    (output,) = (n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(output):
        given_back = graph.call_function(_in_format_of, (output.args[0], inputs[0]))
    output.args = (given_back,)
    graph.lint()
    traced = torch.fx.GraphModule(model, graph, class_name=f"{type(model).__name__}ChannelsLast")
    return traced.eval() if not model.training else traced


def to_channels_last(x):
    """A 4-D floating tensor channels-last (no copy when it is so already); anything else as it
    is."""
    if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
        return x.contiguous(memory_format=torch.channels_last)
    return x


def _in_format_of(outputs, first_input):
    """`outputs` with each 4-D tensor contiguous when `first_input` (as the caller gave it) is
    a contiguous 4-D tensor: the caller's memory format, as PyTorch's layers return it."""
    if not (isinstance(first_input, torch.Tensor) and first_input.dim() == 4):
        return outputs
    if not first_input.is_contiguous():
        return outputs

    def back(value):
        return value.contiguous() if isinstance(value, torch.Tensor) and value.dim() == 4 else value

    return torch.utils._pytree.tree_map(back, outputs)


__all__ = ["channels_last_copy", "fuse_epilogues", "to_channels_last"]
