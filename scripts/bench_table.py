#!/usr/bin/env python3
"""Turns the JSON lines of scripts/bench.sh NAME runs into one table: figure, ours, baseline, ratio.

Input on stdin: lines "NAME {json}". Output: a markdown table."""
import json
import sys


def rows(name, d):
    """(figure, ours, baseline, what the baseline is, ratio); a time's ratio is baseline / ours
    (above 1: ours is faster), other ratios ours / baseline."""
    for figure, ours, base, what in figures(name, d):
        ratio = base / ours if figure.endswith("/ ours)") else ours / base
        yield figure, ours, base, what, ratio


def figures(name, d):
    if name == "store":
        yield "store in-process ops/s (mix of 13 ops per rollout)", d["local_ops_per_s"], 250000, "target 250 k"
        yield "store bytes per span", d["bytes_per_span"], d["payload_bytes_per_span"], "payload bytes"
        for m in d.get("mpi", []):
            yield f"store over MPI ops/s, {m['clients']} client(s)", m["mpi_ops_per_s"], m["raw_pingpong_per_s"], "raw 64 B ping-pong/s"
    elif name == "allreduce":
        for mb in (25, 100):
            yield f"gradient all-reduce MB/s, {mb} MiB", d[f"mb{mb}_reducer_MBps"], d[f"mb{mb}_raw_MBps"], "one MPI_Allreduce"
    elif name == "generate":
        yield "generation tokens/s", d["cached_tokens_per_s"], d["uncached_tokens_per_s"], "no KV cache"
    elif name == "checkpoint":
        # Times: the ratio is baseline over ours (above 1: ours is faster).
        yield "checkpoint write+fsync seconds (ratio: dd / ours)", d["write_s"], d["dd_fsync_s"], "dd conv=fsync, same bytes"
        yield "checkpoint parallel write+fsync seconds, 3 ranks (ratio: dd / ours)", d["parallel_write_s"], d["dd_fsync_s"], "dd conv=fsync, same bytes"
        yield "checkpoint write+fsync seconds (ratio: torch.save / ours)", d["write_s"], d["torch_save_fsync_s"], "torch.save + fsync"
        yield "checkpoint blocking seconds (ratio: memcpy / ours)", d["blocking_s"], d["memcpy_s"], "memcpy, same bytes"
        yield "restore seconds (ratio: read / ours)", d["restore_s"], d["read_s"], f"cat of the file ({d['read_kind']})"
        yield "restore seconds, 3 ranks each its share (ratio: read / ours)", d["shared_restore_s"], d["read_s"], f"cat of the file ({d['read_kind']})"
        yield "incremental version bytes, frozen base (ratio: ours / full)", d["incremental_bytes"], d["full_bytes"], "a full version"
    elif name == "restart":
        yield "restart bytes read (ratio: ours / version, aim <= 1.1)", d["version_bytes"] * d["bytes_read_over_version"], d["version_bytes"], "the version's bytes"
        yield "restart seconds to the first step (ratio: budget / ours)", d["launch_to_first_step_s"], 90, "the 90 s budget"
    elif name == "tokenizer":
        for corpus in ("generated", "repository"):
            yield f"tokenizer tokens/s, {corpus} text (Qwen3)", d[f"{corpus}_tokens_per_s"], d[f"{corpus}_js_tokens_per_s"], "tokenizers.js (Node)"
    elif name == "model":
        yield "model peak RSS bytes, 100 M-parameter Llama (aim <= 1.3)", d["peak_rss_bytes"], d["weight_bytes"], "float32 weight bytes"
        yield "model generation tokens/s, KV cache (aim >= 1)", d["tokens_per_s"], d["pytorch_tokens_per_s"], "PyTorch loop, KV cache"
    elif name == "endpoint":
        yield f"endpoint tokens/s, {d['clients']} streaming clients (aim >= 0.8)", d["tokens_per_s"], d["in_process_tokens_per_s"], "one DecodeBatch in-process"
        yield "endpoint one-token request ms (ratio: in-process / ours)", d["one_token_ms"], d["one_token_in_process_ms"], "the same step in-process"
    elif name == "agl":
        http, mpi = d["http"][0], d["mpi"]
        mix = "AGL API ops/s, the store bench's mix (13 a rollout), 1 client"
        yield mix, http["mix_ops_per_s"], mpi["mpi_ops_per_s"], "store over MPI, 1 client"
        yield mix, http["mix_ops_per_s"], d["local_ops_per_s"], "store in-process"
        # A figure of issue 15, not measured in this run (no Agent Lightning here): a reference, not a baseline.
        yield mix, http["mix_ops_per_s"], d["agl_v03_in_process_ops_per_s"], "reference, not measured here: Agent Lightning v0.3's store in-process (issue 15)"
        yield "AGL API enqueue requests/s, 1 client", http["enqueue_per_s"], mpi["enqueue_per_s"], "enqueue over MPI"
        yield "AGL API dequeue requests/s, 1 client", http["dequeue_per_s"], mpi["dequeue_per_s"], "dequeue over MPI"
        yield "AGL API span JSON requests/s, 1 client", http["spans_json_per_s"], mpi["add_span_per_s"], "add_span over MPI"
        yield "AGL OTLP requests/s (1 span each), 1 client", http["spans_otlp_per_s"], mpi["add_span_per_s"], "add_span over MPI"
        yield "AGL OTLP spans/s (10 a request), 1 client", http["otlp_batch_spans_per_s"], mpi["add_span_per_s"], "add_span over MPI"
        for many in d["http"][1:]:
            yield f"AGL API mix ops/s, {many['clients']} clients", many["mix_ops_per_s"], http["mix_ops_per_s"], "the same, 1 client"
    elif name == "decode_batch":
        yield "continuous batching tokens/s, ragged", d["decode_batch_tokens_per_s"], d["generate_tokens_per_s"], "Policy::generate, equal prompts"
    elif name == "kv_window":
        yield "runner RSS MiB once listening, 16 rows x 4,096 positions, 10 of 12 layers sliding over 512", d["peak_rss_windowed_mib"], d["peak_rss_full_mib"], "every layer keeping 4,096"
    elif name == "long_context":
        yield (f"training step peak RSS growth MiB, one sequence of {d['short_tokens']:,} -> {d['tokens']:,} tokens",
               d["arclight_growth_mib"], d["pytorch_growth_mib"], "plain PyTorch, eager attention")
    elif name == "train":
        # Time: lower is better, so the ratio is baseline over ours.
        yield "train step seconds (ratio: DDP / ours)", d["arclight_step_s"], d["ddp_step_s"], "PyTorch DDP gloo"


def fmt(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main():
    """A line that does not read (a failed run's output, a benchmark without its figures) is named on stderr and the
    exit status is 1, after the table of the rest."""
    print("| figure | ours | baseline | baseline is | ratio |")
    print("| --- | --- | --- | --- | --- |")
    bad = 0
    for number, line in enumerate(sys.stdin, 1):
        name, _, payload = line.strip().partition(" ")
        if not payload:
            continue
        try:
            table = [f"| {figure} | {fmt(ours)} | {fmt(base)} | {what} | {ratio:.2f} |"
                     for figure, ours, base, what, ratio in rows(name, json.loads(payload))]
        except (ValueError, KeyError, TypeError, ZeroDivisionError) as e:
            print(f"bench_table.py: line {number} ({name}): {type(e).__name__}: {e}", file=sys.stderr)
            bad += 1
            continue
        for row in table:
            print(row)
    return 1 if bad else 0


sys.exit(main())
