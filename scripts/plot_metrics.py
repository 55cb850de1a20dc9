#!/usr/bin/python3
"""Plots and a summary of a run: scripts/plot_metrics.py RUN_DIR [THRESHOLD]

Reads RUN_DIR/metrics.jsonl and writes RUN_DIR/report/: learning.png (reward, success,
grad norm, entropy), validation.png (validation figures against the optimum where the task
has one), throughput.png (rollouts/s, tokens/s, and where each step's time went) and
summary.md (best validation, time to the threshold, rollouts, failures, retries,
checkpoints). Uses Debian's python3-matplotlib."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if key in r]
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    run_dir = sys.argv[1]
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.95
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        rows = [json.loads(line) for line in open(path) if line.strip()]
    except FileNotFoundError:
        raise SystemExit(f"{path}: no such file (is {run_dir} a run directory?)")
    if not rows:
        raise SystemExit(f"{path} is empty")
    out = os.path.join(run_dir, "report")
    os.makedirs(out, exist_ok=True)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, key in zip(axes.flat, ["reward", "success", "grad_norm", "entropy"]):
        ax.plot(*series(rows, key), lw=1)
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(f"learning: {run_dir}")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "learning.png"), dpi=90)
    plt.close(fig)

    val_keys = sorted({k for r in rows for k in r if k.startswith("val_")})
    fig, axes = plt.subplots(1, max(1, len(val_keys)), figsize=(5.5 * max(1, len(val_keys)), 4), squeeze=False)
    for ax, key in zip(axes.flat, val_keys or ["val_success"]):
        ax.plot(*series(rows, key), marker="o", ms=3, lw=1, label=key)
        if key == "val_guesses":
            steps, optimum = series(rows, "optimal_guesses")
            if optimum:
                ax.axhline(optimum[-1], color="green", ls="--", label=f"binary search {optimum[-1]:.2f}")
                ax.axhline(1.2 * optimum[-1], color="orange", ls=":", label="1.2x optimum")
        if key == "val_success":
            ax.axhline(threshold, color="grey", ls=":", label=f"threshold {threshold}")
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "validation.png"), dpi=90)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].plot(*series(rows, "rollouts_per_s"), lw=1)
    axes[0].set_title("rollouts/s")
    axes[1].plot(*series(rows, "tokens_per_s"), lw=1)
    axes[1].set_title("tokens/s")
    steps = [r["step"] for r in rows]
    parts = [k for k in ("time_rollout", "time_train", "time_sync") if k in rows[0]]
    axes[2].stackplot(steps, *[[r.get(k, 0) for r in rows] for k in parts], labels=parts)
    axes[2].set_title("seconds per step")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=90)
    plt.close(fig)

    last = rows[-1]
    val = [r for r in rows if "val_success" in r]
    best = max(val, key=lambda r: r["val_success"]) if val else None
    reached = next((r for r in val if r["val_success"] >= threshold), None)
    lines = [
        f"# Run report: {run_dir}",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| steps | {last['step']} |",
        f"| wall time | {last.get('elapsed', 0):.1f} s |",
        f"| rollouts | {sum(r.get('rollouts', 0) for r in rows):.0f} |",
        f"| failed rollouts | {sum(r.get('failed', 0) for r in rows):.0f} |",
        f"| retries | {sum(r.get('retries', 0) for r in rows):.0f} |",
        f"| checkpoints | {sum(1 for r in rows if 'checkpoint_seconds' in r)} |",
        f"| final train reward, success | {last.get('reward', float('nan')):.3f}, {last.get('success', float('nan')):.3f} |",
    ]
    if best:
        extra = ", ".join(f"{k} {best[k]:.3f}" for k in sorted(best) if k.startswith("val_") and k != "val_success")
        lines.append(f"| best validation success | {best['val_success']:.3f} at step {best['step']}" + (f" ({extra})" if extra else "") + " |")
        if "optimal_guesses" in best and "val_guesses" in best:
            lines.append(f"| guesses against the optimum | {best['val_guesses']:.2f} / {best['optimal_guesses']:.2f} = {best['val_guesses'] / best['optimal_guesses']:.2f}x |")
    lines.append(
        f"| time to validation success >= {threshold} | "
        + (f"step {reached['step']}, {reached.get('elapsed', 0):.1f} s |" if reached else "not reached |")
    )
    lines += ["", "![learning](learning.png)", "![validation](validation.png)", "![throughput](throughput.png)", ""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:-5]))
    print(f"plots in {out}")


main()
