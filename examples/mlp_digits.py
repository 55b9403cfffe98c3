"""Train an MLP classifier on scikit-learn's bundled digits (8x8 images, 10 classes).

    pip install -e ".[examples]" && python examples/mlp_digits.py
"""
from __future__ import annotations

import argparse

import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.utils.data import DataLoader, TensorDataset


def load_digits_split(seed: int = 0):
    """Standardised digits features split 80/20 into train and test arrays."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise SystemExit("this example needs scikit-learn: pip install -e '.[examples]'") from e
    d = load_digits()
    x = d.data.astype(np.float32) / 16.0
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    n_test = len(x) // 5
    mean, std = x[n_test:].mean(0), x[n_test:].std(0) + 1e-3
    x = (x - mean) / std
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def build_model(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train(epochs: int = 30, batch_size: int = 64, lr: float = 1e-3, seed: int = 0) -> float:
    """Train and return the test accuracy."""
    flow.manual_seed(seed)
    (xtr, ytr), (xte, yte) = load_digits_split(seed)
    loader = DataLoader(TensorDataset(flow.from_numpy(xtr), flow.from_numpy(ytr)),
                        batch_size=batch_size, shuffle=True)
    model = build_model()
    opt = flow.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with flow.no_grad():
        pred = model(flow.from_numpy(xte)).argmax(dim=1).numpy()
    return float((pred == yte).mean())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="MLP on scikit-learn digits")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    acc = train(epochs=args.epochs, seed=args.seed)
    print(f"test accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
