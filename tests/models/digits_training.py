"""The training loop the digits model scripts share (``make_float.py``, ``make_digits_cnn.py`` and the demo's
``make_digits_mlp.py``): Adam with a cosine schedule, cross-entropy, shuffled mini-batches from a seeded
generator, so that a script rerun makes the same model."""

from __future__ import annotations

import torch


def train(model, frames, labels, *, seed: int, epochs: int, batch_size: int, learning_rate: float) -> None:
    """Train ``model`` on ``frames`` and integer ``labels`` (tensors), then leave it in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(frames), generator=generator)
        for start in range(0, len(frames), batch_size):
            batch = order[start:start + batch_size]
            optimizer.zero_grad()
            loss_fn(model(frames[batch]), labels[batch]).backward()
            optimizer.step()
        scheduler.step()
    model.eval()
