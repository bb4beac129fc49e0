"""The MLP step of tests/gpu/mlp.json in PyTorch on the same GPU, for
run.sh: inputs and parameters go up from host memory, forward, backward
for the weights and biases, gradients come down, as tl's bench-mlp does.
f32 with TF32 off (tl never lowers precision)."""
import sys
import time

import torch

B, D, H, O = 4096, 1024, 4096, 1024


def main():
    if not torch.cuda.is_available():
        print("bench-mlp: torch sees no GPU")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    g = torch.Generator().manual_seed(1)

    def filled(*shape, scale):
        return (torch.rand(*shape, generator=g) * 2 - 1) * scale

    x, y = filled(B, D, scale=1.0), filled(B, O, scale=1.0)
    params = [filled(D, H, scale=0.03), filled(H, scale=0.1), filled(H, O, scale=0.015), filled(O, scale=0.1)]

    def step():
        xs, ys = x.cuda(), y.cuda()
        w1, b1, w2, b2 = [p.cuda().requires_grad_() for p in params]
        loss = ((torch.tanh(xs @ w1 + b1) @ w2 + b2 - ys) ** 2).mean()
        loss.backward()
        grads = [p.grad.cpu() for p in (w1, b1, w2, b2)]
        return loss.item(), grads

    times = []
    for i in range(12):
        t0 = time.perf_counter()
        loss, _ = step()
        torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    times.sort()
    ms = times[len(times) // 2] * 1e3
    print("bench-mlp: torch %s on %s: %.2f ms a step (median of %d; loss %.6g)"
          % (torch.__version__, torch.cuda.get_device_name(0), ms, len(times), loss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
