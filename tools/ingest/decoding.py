"""Bytes to text for the loaders: byte-order marks, BOM-less UTF-16, and telling binary from text."""

from __future__ import annotations

import codecs

_SNIFF_BYTES = 8192
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def sniff_encoding(raw: bytes) -> tuple[str | None, int]:
    """(encoding, BOM length) from a byte-order mark, or UTF-16 recognised by its NUL pattern.

    BOM-less UTF-16 text in a Latin script has a NUL in every other byte; when
    at least 90% of the even (or odd) bytes of the sample are NUL and almost
    none of the others are, it is UTF-16-BE (or -LE). Else (None, 0).
    """
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name, len(bom)
    sample = raw[: _SNIFF_BYTES - _SNIFF_BYTES % 2]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        share = lambda part: part.count(0) / len(part)  # noqa: E731
        if share(even) >= 0.9 and share(odd) <= 0.1:
            return "utf-16-be", 0
        if share(odd) >= 0.9 and share(even) <= 0.1:
            return "utf-16-le", 0
    return None, 0


def decode_bytes(raw: bytes) -> tuple[str | None, bool]:
    """Decode file bytes: (text, used_replacement), or (None, _) when the bytes look binary.

    A byte-order mark (UTF-8/16/32) or the NUL pattern of UTF-16 selects the
    encoding. Otherwise binary means a NUL byte in the first 8 KiB, or bytes
    that are not UTF-8 and whose sample is mostly control characters or
    replacement characters.
    """
    encoding, skip = sniff_encoding(raw)
    if encoding is not None:
        body = raw[skip:]
        try:
            text = body.decode(encoding)
            replaced = False
        except UnicodeDecodeError:
            text, replaced = body.decode(encoding, errors="replace"), True
        if "\x00" not in text[:_SNIFF_BYTES]:
            return text, replaced
    sample = raw[:_SNIFF_BYTES]
    if b"\x00" in sample:
        return None, False
    try:
        return raw.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        pass
    controls = sum(1 for b in sample if (b < 32 and b not in b"\t\n\r\f\v\b\x1b") or b == 127)
    decoded_sample = sample.decode("utf-8", errors="replace")
    bad = decoded_sample.count("\ufffd")
    if sample and (controls / len(sample) > 0.10 or bad / max(len(decoded_sample), 1) > 0.30):
        return None, False
    return raw.decode("utf-8", errors="replace"), True
