"""
make_ref.py - the golden reference for tests/test_model.c, written in plain PyTorch.

A tiny spiking ResNet-18 (snn.c's SNN_MODEL_RESNET18 with width 4 on 3x8x8 inputs, T = 4,
batch 2, LIF tau 2 with decay_input, hard reset to 0, V_th 1, ATan(alpha 2) surrogate, direct
encoding) is run forward and backward once, then trained for 10 plain-SGD steps on the same
batch. Everything is computed in float64 from float32-representable weights and inputs, so the
only difference from snn.c's float32 kernels is rounding. Output: tests/ref/tiny_resnet.safetensors
holding the parameters under snn.c's names, the inputs, the logits, the loss, every parameter
gradient ("grad.<name>") and the 10 losses ("losses").

    python3 tests/ref/make_ref.py        # needs torch and safetensors (the GPU machine has both)

The model is written out here by hand (no SpikingJelly), following DESIGN.md section 4 and
nn/model_resnet.c: out = sn2(bn2(conv2(sn1(bn1(conv1 x)))) + shortcut(x)).
"""
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

torch.manual_seed(1234)
D = torch.float64
T, N, C_IN, H, W, CLASSES, WIDTH = 4, 2, 3, 8, 8, 10, 4
TAU, V_TH, V_RESET, ALPHA = 2.0, 1.0, 0.0, 2.0
LR, STEPS = 0.5, 10


class SpikeATan(torch.autograd.Function):
    """Heaviside forward (x >= 0 fires), ATan surrogate backward: g'(x) = (a/2) / (1 + (pi/2 a x)^2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (ALPHA / 2) / (1 + (math.pi / 2 * ALPHA * x) ** 2)


def lif(x):
    """Multi-step LIF over x (T, ...): H = V + (X - (V - V_reset)) / tau, S = H >= V_th, hard reset."""
    v = torch.full_like(x[0], V_RESET)
    spikes = []
    for t in range(x.shape[0]):
        h = v + (x[t] - (v - V_RESET)) / TAU
        s = SpikeATan.apply(h - V_TH)
        v = h * (1 - s) + V_RESET * s
        spikes.append(s)
    return torch.stack(spikes)


def uniform(shape, bound):
    # float32-representable values, held in float64
    return ((torch.rand(shape, dtype=torch.float32) * 2 - 1) * bound).to(D)


def make_params():
    p = {}

    def conv(name, cin, cout, k):
        p[name + ".weight"] = uniform((cout, cin, k, k), 1 / math.sqrt(cin * k * k))

    def bn(name, c):
        p[name + ".weight"] = (0.5 + torch.rand(c, dtype=torch.float32)).to(D)
        p[name + ".bias"] = (torch.rand(c, dtype=torch.float32) - 0.25).to(D)
        p[name + ".running_mean"] = torch.zeros(c, dtype=D)
        p[name + ".running_var"] = torch.ones(c, dtype=D)

    conv("conv1", C_IN, WIDTH, 3)
    bn("bn1", WIDTH)
    cin = WIDTH
    for layer in range(4):
        cout = WIDTH << layer
        for b in range(2):
            pre = f"layer{layer + 1}.{b}."
            stride = 2 if (layer and b == 0) else 1
            conv(pre + "conv1", cin if b == 0 else cout, cout, 3)
            bn(pre + "bn1", cout)
            conv(pre + "conv2", cout, cout, 3)
            bn(pre + "bn2", cout)
            if b == 0 and (stride != 1 or cin != cout):
                conv(pre + "downsample.0", cin, cout, 1)
                bn(pre + "downsample.1", cout)
        cin = cout
    p["fc.weight"] = uniform((CLASSES, cin), 1 / math.sqrt(cin))
    p["fc.bias"] = uniform((CLASSES,), 1 / math.sqrt(cin))
    return p


def batchnorm(x, p, name):
    return F.batch_norm(x, p[name + ".running_mean"], p[name + ".running_var"], p[name + ".weight"],
                        p[name + ".bias"], training=True, momentum=0.1, eps=1e-5)


def forward(p, x):
    # stem: conv + BN once on the N images, repeated over T, then the first neuron layer
    h = batchnorm(F.conv2d(x, p["conv1.weight"], None, 1, 1), p, "bn1")
    h = lif(h.unsqueeze(0).expand(T, *h.shape))
    cin = WIDTH
    for layer in range(4):
        cout = WIDTH << layer
        for b in range(2):
            pre = f"layer{layer + 1}.{b}."
            stride = 2 if (layer and b == 0) else 1
            flat = h.flatten(0, 1)
            y = batchnorm(F.conv2d(flat, p[pre + "conv1.weight"], None, stride, 1), p, pre + "bn1")
            y = lif(y.view(T, N, *y.shape[1:]))
            y = batchnorm(F.conv2d(y.flatten(0, 1), p[pre + "conv2.weight"], None, 1, 1), p, pre + "bn2")
            if pre + "downsample.0.weight" in p:
                sc = batchnorm(F.conv2d(flat, p[pre + "downsample.0.weight"], None, stride, 0), p,
                               pre + "downsample.1")
            else:
                sc = flat
            h = lif((y + sc).view(T, N, *y.shape[1:]))
        cin = cout
    pooled = h.mean(dim=(3, 4))                                  # (T, N, C)
    out = F.linear(pooled, p["fc.weight"], p["fc.bias"])         # (T, N, classes)
    return out.mean(dim=0)                                       # (N, classes)


def main():
    p = make_params()
    snapshot = {k: v.clone() for k, v in p.items()}
    x = torch.randn(N, C_IN, H, W, dtype=torch.float32).to(D)
    labels = torch.tensor([3, 7])
    trainable = [k for k in p if not k.endswith(("running_mean", "running_var"))]
    for k in trainable:
        p[k].requires_grad_(True)

    logits = forward(p, x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out = {k: v.to(torch.float32).contiguous() for k, v in snapshot.items()}
    out["input.x"] = x.to(torch.float32)
    out["input.labels"] = labels.to(torch.float32)
    out["ref.logits"] = logits.detach().to(torch.float32)
    out["ref.loss"] = loss.detach().reshape(1).to(torch.float32)
    for k in trainable:
        out["grad." + k] = p[k].grad.to(torch.float32).contiguous()

    # 10 steps of plain SGD on the same batch; BN running statistics keep updating
    p = {k: v.clone().requires_grad_(k in trainable) for k, v in snapshot.items()}
    losses = []
    for _ in range(STEPS):
        for k in trainable:
            p[k].grad = None
        loss = F.cross_entropy(forward(p, x), labels)
        loss.backward()
        losses.append(loss.item())
        with torch.no_grad():
            for k in trainable:
                p[k] -= LR * p[k].grad
    out["ref.losses"] = torch.tensor(losses, dtype=torch.float32)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_resnet.safetensors")
    save_file(out, path, metadata={"made_by": "tests/ref/make_ref.py", "lr": str(LR), "steps": str(STEPS)})
    print(f"wrote {path}: loss {out['ref.loss'].item():.6f}, losses {[round(v, 5) for v in losses]}")


if __name__ == "__main__":
    main()
