"""OTLP's protobuf, encoded by hand from its field numbers (the tests' clients use the standard library only)."""


def varint(n):
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def field(number, payload):  # length-delimited
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number, value):
    return varint(number << 3 | 1) + value.to_bytes(8, "little")


def key_value(key, value):
    any_value = field(1, value.encode()) if isinstance(value, str) else varint(3 << 3) + varint(value)
    return field(1, key.encode()) + field(2, any_value)
