"""The convolution step of tests/gpu/conv.json in PyTorch on the same GPU,
for run.sh: inputs and parameters go up from host memory, forward,
backward for x, w and b, gradients come down, as tl's bench-conv does.
f32 with TF32 off (tl never lowers precision); cuDNN picks its fastest
algorithm (benchmark mode), so this is the best library on the machine."""
import sys
import time

import torch

N, C, H, W = 32, 128, 56, 56


def main():
    if not torch.cuda.is_available():
        print("bench-conv: torch sees no GPU")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    g = torch.Generator().manual_seed(1)

    def filled(*shape, scale):
        return (torch.rand(*shape, generator=g) * 2 - 1) * scale

    params = [filled(N, C, H, W, scale=1.0), filled(C, C, 3, 3, scale=0.03), filled(C, scale=0.1)]

    def step():
        x, w, b = [p.cuda().requires_grad_() for p in params]
        loss = (torch.relu(torch.nn.functional.conv2d(x, w, b, padding=1)) ** 2).mean()
        loss.backward()
        grads = [p.grad.cpu() for p in (x, w, b)]
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
    print("bench-conv: torch %s on %s: %.2f ms a step (median of %d; loss %.6g)"
          % (torch.__version__, torch.cuda.get_device_name(0), ms, len(times), loss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
