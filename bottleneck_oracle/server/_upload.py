"""Uploaded trace files, streamed from a multipart body into a folder of the workspace with the size
limit enforced as the bytes arrive (nothing is held in memory or spooled past the limit)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fastapi import HTTPException
from python_multipart.multipart import MultipartParseError, MultipartParser, parse_options_header

from bottleneck_oracle.errors import ConfigError

__all__ = ["OP_TABLE_SUFFIXES", "TRACE_SUFFIXES", "Upload", "check_name", "receive_upload"]

FILES_FIELD = "files"
NAME_FIELD = "name"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TRACE_SUFFIXES = (".json", ".json.gz")
OP_TABLE_SUFFIXES = (".parquet", ".csv", ".yaml")  # a pipeline job's op table and its meta.yaml
_MAX_NAME_BYTES = 1024  # the most one text field may hold
_MAX_VALUES = 32  # the most text fields one body may send


@dataclass
class Upload:
    """What a body held: the files written (in the order sent), the ``name`` field and the other text fields
    the route takes (each field's values in the order sent)."""

    files: list[Path] = field(default_factory=list)
    name: str | None = None
    fields: dict[str, list[str]] = field(default_factory=dict)


class _Receiver:
    """The multipart parser's callbacks: headers of each part, then its bytes to a file or a field."""

    def __init__(self, folder: Path, suffixes: tuple[str, ...], fields: tuple[str, ...] = ()) -> None:
        self.folder, self.upload, self.suffixes, self.fields = folder, Upload(), suffixes, fields
        self._header, self._value, self._headers = b"", b"", {}  # type: ignore[var-annotated]
        self._out: BinaryIO | None = None
        self._field: bytearray | None = None
        self._field_name, self._values = NAME_FIELD, 0

    def on_part_begin(self) -> None:
        self._headers = {}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._header.lower()] = self._value
        self._header, self._value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        if name == FILES_FIELD and filename is not None:
            self._out = _open_file(self.folder, Path(filename.decode("utf-8", "replace")).name, self.upload,
                                   self.suffixes)
        elif name in (NAME_FIELD, *self.fields) and filename is None:
            self._values += 1
            if self._values > _MAX_VALUES:
                raise ConfigError(f"upload: more than {_MAX_VALUES} text fields")
            self._field, self._field_name = bytearray(), name
        else:
            optional = ", ".join(repr(f) for f in (NAME_FIELD, *self.fields))
            raise ConfigError(f"upload: unexpected part {name!r}; send the files under {FILES_FIELD!r} and the "
                              f"optional {optional}")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._out is not None:
            self._out.write(data[start:end])
        elif self._field is not None:
            self._field += data[start:end]
            if len(self._field) > _MAX_NAME_BYTES:
                raise ConfigError(f"upload: the {self._field_name!r} field is over {_MAX_NAME_BYTES} bytes")

    def on_part_end(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        elif self._field is not None:
            value = self._field.decode("utf-8", "replace").strip()
            if self._field_name == NAME_FIELD:
                self.upload.name = value or None
            elif value:
                self.upload.fields.setdefault(self._field_name, []).append(value)
            self._field = None

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


def _open_file(folder: Path, filename: str, upload: Upload, suffixes: tuple[str, ...]) -> BinaryIO:
    if not _SAFE.fullmatch(filename) or not filename.endswith(suffixes):
        like = {TRACE_SUFFIXES: "rank0.json or rank0.json.gz", OP_TABLE_SUFFIXES: "trace.parquet, trace.csv or "
                "meta.yaml"}.get(suffixes, "nccl_trace_rank_0")
        raise ConfigError(f"upload: file {filename!r}: expected a file named like {like} "
                          "(letters, digits, '.', '_', '-')")
    path = folder / filename
    if path.exists():
        raise ConfigError(f"upload: file {filename!r} sent twice")
    folder.mkdir(parents=True, exist_ok=True)
    upload.files.append(path)
    return path.open("wb")


def check_name(name: str) -> str:
    """``name`` when it can name a trace folder.

    Raises:
        ConfigError: it cannot.
    """
    if not _SAFE.fullmatch(name):
        raise ConfigError(f"upload: name {name[:64]!r}: use up to 128 letters, digits, '.', '_' or '-'")
    return name


async def receive_upload(content_type: str | None, chunks: AsyncIterator[bytes], folder: Path,
                         limit_bytes: int, suffixes: tuple[str, ...] = TRACE_SUFFIXES,
                         fields: tuple[str, ...] = ()) -> Upload:
    """Writes the files of a multipart body into ``folder`` as its bytes arrive (``suffixes``: the endings a
    file name may have; ``("",)`` takes any, as Flight Recorder dumps have none; ``fields``: the text fields
    taken beside ``name``, each up to 1 KiB, 32 in all).

    Raises:
        HTTPException: 413, the body passes ``limit_bytes``. ConfigError: not multipart, a part other than
            the files and the name, a file name that is not a trace's, no file, a broken body.
    """
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or b"boundary" not in options:
        raise ConfigError(f"upload: expected a multipart/form-data body with the trace files under {FILES_FIELD!r}")
    receiver = _Receiver(folder, suffixes, fields)
    callbacks = {name: getattr(receiver, name) for name in (
        "on_part_begin", "on_header_field", "on_header_value", "on_header_end", "on_headers_finished",
        "on_part_data", "on_part_end")}
    parser = MultipartParser(options[b"boundary"], callbacks)  # type: ignore[arg-type]
    received = 0
    try:
        async for chunk in chunks:
            received += len(chunk)
            if received > limit_bytes:
                raise HTTPException(413, f"upload: over the limit of {limit_bytes / 2**20:g} MiB")
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as e:
        raise ConfigError(f"upload: not a well-formed multipart body ({e})") from None
    finally:
        receiver.close()
    if not receiver.upload.files:
        raise ConfigError(f"upload: no trace file under {FILES_FIELD!r}")
    return receiver.upload
