"""
torch_train_step.py - the PyTorch side of bench_train_step: the same spiking ResNet-18 (CIFAR
stem, width 64, LIF tau 2 with decay_input, hard reset, ATan surrogate, direct encoding with the
stem run once and repeated over T, multi-step with time folded into the batch for convs and BN),
written in plain torch with our own multi-step LIF loop, timed the same way: median of 20 steps
after 3 warm-ups, the device synchronised around each step, Adam.

    python3 bench/torch_train_step.py [--T 4] [--batch 64,128] [--tf32] [--bf16]

PyTorch's defaults let cuDNN convolutions use TF32 (torch.backends.cudnn.allow_tf32 = True);
--tf32 keeps that, the default here turns it off so that both sides compute in fp32. --bf16 runs
the forward under torch.autocast(bfloat16): convolutions and the classifier in BF16, BN and the
neurons as autocast chooses, fp32 master weights (the usual mixed-precision recipe).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SpikeATan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 1.0 / (1 + (math.pi / 2 * 2.0 * x) ** 2)


class LIF(nn.Module):
    """Multi-step LIF over (T, N, ...): H = V + (X - V) / tau, S = H >= 1, hard reset to 0."""

    def forward(self, x):
        v = torch.zeros_like(x[0])
        out = []
        for t in range(x.shape[0]):
            h = v + (x[t] - v) / 2.0
            s = SpikeATan.apply(h - 1.0)
            v = h * (1 - s)
            out.append(s)
        return torch.stack(out)


def seq(module, x):
    """Run a stateless module on (T, N, ...) by folding T into the batch."""
    T, N = x.shape[:2]
    y = module(x.flatten(0, 1))
    return y.view(T, N, *y.shape[1:])


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.sn1 = LIF()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.sn2 = LIF()
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = self.sn1(seq(lambda z: self.bn1(self.conv1(z)), x))
        h = seq(lambda z: self.bn2(self.conv2(z)), h)
        sc = seq(self.down, x) if self.down is not None else x
        return self.sn2(h + sc)


class SpikingResNet18(nn.Module):
    def __init__(self, T, width=64, classes=10):
        super().__init__()
        self.T = T
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.sn1 = LIF()
        layers, cin = [], width
        for i in range(4):
            cout = width << i
            layers += [Block(cin, cout, 1 if i == 0 else 2), Block(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        h = self.bn1(self.conv1(x))
        h = self.sn1(h.unsqueeze(0).repeat(self.T, 1, 1, 1, 1))
        h = self.layers(h)
        return self.fc(h.mean(dim=(3, 4))).mean(0)


def timed(fn, steps):
    times = []
    for s in range(-3, steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if s >= 0:
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=4)
    ap.add_argument("--batch", default="64,128")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = SpikingResNet18(a.T).to(dev)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name()}, T={a.T}, tf32={'on' if a.tf32 else 'off'}, bf16 autocast={'on' if a.bf16 else 'off'}")
    print("| phase | batch | ms / step | images / s | peak device MB |\n|---|---:|---:|---:|---:|")
    for b in [int(v) for v in a.batch.split(",")]:
        x = torch.randn(b, 3, 32, 32, device=dev)
        y = torch.arange(b, device=dev) % 10
        model.train()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        t = timed(step, a.steps)
        print(f"| train | {b} | {1e3 * t:.2f} | {b / t:.0f} | {torch.cuda.max_memory_allocated() / 1e6:.0f} |")
    model.eval()
    for b in (1, 64):
        x = torch.randn(b, 3, 32, 32, device=dev)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
            t = timed(lambda: model(x), a.steps)
        print(f"| infer | {b} | {1e3 * t:.2f} | {b / t:.0f} | {torch.cuda.max_memory_allocated() / 1e6:.0f} |")


if __name__ == "__main__":
    main()
