"""An independent reader of arclight's TensorBoard event files (Debian's python3-protobuf).

Checks the TFRecord framing and both masked CRC-32C of every record, parses each Event with
classes protoc generates from TensorFlow's messages (tensorflow_event.proto beside this file,
not arclight's own), checks that each value is a simple_value as TensorBoard tells it, and
compares every scalar with the same step's figure in metrics.jsonl.
Usage: read_events.py RUN_DIR OUT_DIR"""
import glob
import importlib
import json
import math
import os
import struct
import subprocess
import sys


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def masked_crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise SystemExit(f"{path}: truncated header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if masked_crc32c(header) != length_crc:
            raise SystemExit(f"{path}: bad length CRC at byte {at}")
        data = blob[at + 12:at + 12 + length]
        if len(data) != length or len(blob) < at + 16 + length:
            raise SystemExit(f"{path}: truncated record at byte {at}")
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if masked_crc32c(data) != data_crc:
            raise SystemExit(f"{path}: bad data CRC at byte {at}")
        yield data
        at += 16 + length


def main():
    run_dir, out_dir = sys.argv[1:3]
    proto_dir = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["protoc", f"--proto_path={proto_dir}", f"--python_out={out_dir}", "tensorflow_event.proto"],
                   check=True)
    sys.path.insert(0, out_dir)
    event_pb2 = importlib.import_module("tensorflow_event_pb2")
    metrics = {row["step"]: row for row in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl")))}
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    if len(files) != 1:
        raise SystemExit(f"expected one event file, found {files}")
    events = [event_pb2.Event.FromString(r) for r in records(files[0])]
    if events[0].file_version != "brain.Event:2":
        raise SystemExit(f"first record is not the file version: {events[0]}")
    checked = zeros = 0
    steps = []
    for e in events[1:]:
        steps.append(e.step)
        row = metrics[e.step]
        # TensorBoard (data_compat.migrate_value) reads a value by the field of its oneof that is set: none, and the
        # point is not plotted (a plain proto3 float of 0 is not written).
        unset = [v.tag for v in e.summary.value if v.WhichOneof("value") != "simple_value"]
        if unset:
            raise SystemExit(f"step {e.step}: values TensorBoard would drop (no simple_value set): {unset}")
        tags = {v.tag: v.simple_value for v in e.summary.value}
        zeros += sum(1 for value in tags.values() if value == 0)
        if set(tags) != set(row) - {"step"}:
            raise SystemExit(f"step {e.step}: tags {sorted(tags)} differ from metrics.jsonl's {sorted(row)}")
        for tag, value in tags.items():
            expected = row[tag]
            if not math.isclose(value, expected, rel_tol=1e-5, abs_tol=1e-5):
                raise SystemExit(f"step {e.step} {tag}: event {value} != metrics.jsonl {expected}")
            checked += 1
    if steps != sorted(metrics):
        raise SystemExit(f"event steps {steps} != metrics.jsonl steps {sorted(metrics)}")
    # Wall times move with the run's seconds, a resumed run's earlier rows too (they all had the resume's instant).
    for before, after in zip(events[1:], events[2:]):
        wall = after.wall_time - before.wall_time
        elapsed = metrics[after.step].get("elapsed", 0) - metrics[before.step].get("elapsed", 0)
        if wall < -1e-3 or (elapsed >= 0.005 and wall <= 0):
            raise SystemExit(f"steps {before.step} to {after.step}: wall time moved {wall:.3f} s, elapsed {elapsed:.3f} s")
    if zeros == 0:
        raise SystemExit("no scalar of 0 among the events: the run no longer shows that zeros are written")
    print(f"{len(events)} records, framing and CRCs good, {checked} scalars ({zeros} of them 0) match metrics.jsonl")


main()
