"""
torch_recurrent.py - the PyTorch side of bench_recurrent: the same recurrent spiking layer
(I[t] = X[t] + S[t-1] W^T, then LIF tau 2 with decay_input and hard reset, or ALIF with
tau_adapt 20 and beta 1.8; ATan surrogate, alpha 2) written as a plain PyTorch loop over T with
autograd through it, timed the same way: forward + backward of sum(spikes), median of 10 passes
after 2 warm-ups, the device synchronised around each pass, fp32 (TF32 off).

    python3 bench/torch_recurrent.py [--device cuda]
"""
import argparse
import math
import time

import torch

# the spike function with the ATan surrogate (alpha 2), as the ResNet benchmark defines it
from torch_train_step import SpikeATan


def recurrent_layer(x, w, kind, tau=2.0, tau_adapt=20.0, beta=1.8):
    """x (T, N, F), w (F, F) -> spikes (T, N, F)."""
    T, N, F = x.shape
    v = torch.zeros(N, F, device=x.device)
    a = torch.zeros(N, F, device=x.device)
    s = torch.zeros(N, F, device=x.device)
    rho = math.exp(-1.0 / tau_adapt)
    out = []
    for t in range(T):
        i = x[t] + s @ w.t()
        h = v + (i - v) / tau
        th = 1.0 + beta * a if kind == "alif" else 1.0
        s = SpikeATan.apply(h - th)
        v = h * (1 - s)
        if kind == "alif":
            a = rho * a + (1 - rho) * s
        out.append(s)
    return torch.stack(out)


def time_pass(kind, T, N, F, device, steps=10):
    g = torch.Generator(device="cpu").manual_seed(1)
    x = (0.3 + 0.5 * torch.randn(T, N, F, generator=g)).to(device).requires_grad_()
    w = (0.5 * torch.randn(F, F, generator=g) / F).to(device).requires_grad_()
    times = []
    for s in range(-2, steps):
        x.grad = None
        w.grad = None
        torch.cuda.synchronize() if device == "cuda" else None
        t0 = time.perf_counter()
        recurrent_layer(x, w, kind).sum().backward()
        torch.cuda.synchronize() if device == "cuda" else None
        if s >= 0:
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"PyTorch {torch.__version__} loop, forward + backward, device {args.device}")
    print("| neuron | T | N | F | ms / pass | us / time step |\n|---|---:|---:|---:|---:|---:|")
    for kind in ("lif", "alif"):
        for T, N, F in ((28, 128, 256), (784, 128, 128), (100, 256, 512)):
            t = time_pass(kind, T, N, F, args.device)
            print(f"| {kind} | {T} | {N} | {F} | {1e3 * t:.2f} | {1e6 * t / T:.1f} |", flush=True)


if __name__ == "__main__":
    main()
