"""Chakra's execution-trace schema, as protobuf message classes built at run time.

Chakra (github.com/mlcommons/chakra) stores one execution trace (ET) per rank in the protobuf
schema ``schema/protobuf/et_def.proto`` (package ``ChakraProtoMsg``). The messages below are
that schema, field for field (names, numbers and types as in et_def.proto at mlcommons/chakra
21585d8, the version ASTRA-sim 518bd51 reads), described to the protobuf runtime with
``descriptor_pb2`` so that no generated ``et_def_pb2.py`` (and no ``protoc``) is needed. The
protobuf runtime does the parsing; this module only names the fields.

An ET file is a sequence of length-delimited messages (Chakra's ``protolib.encodeMessage``: a
varint byte count, then the message): one ``GlobalMetadata``, then ``Node`` after ``Node``.

Use `message_classes` for the classes; `NodeType` and `CollectiveCommType` hold the enums.
"""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import Any

__all__ = ["CollectiveCommType", "NodeType", "message_classes"]

PACKAGE = "ChakraProtoMsg"


class NodeType(IntEnum):
    """``ChakraProtoMsg.NodeType``."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveCommType(IntEnum):
    """``ChakraProtoMsg.CollectiveCommType``."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


# AttributeProto's oneof ``value``: (field number, scalar type or list message), in et_def.proto order
_SCALARS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
            "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
_LISTS = ("DoubleList", "FloatList", "Int32List", "Int64List", "Uint32List", "Uint64List", "Sint32List",
          "Sint64List", "Fixed32List", "Fixed64List", "Sfixed32List", "Sfixed64List", "BoolList",
          "StringList", "BytesList")


@functools.cache
def message_classes() -> dict[str, Any]:
    """The schema's message classes by name: ``GlobalMetadata``, ``Node``, ``AttributeProto``,
    ``IOInfo``, ``Tensor`` and the list messages (``Int64List`` ...).

    Raises:
        ConfigError: If the protobuf runtime is not installed (the ``chakra`` extra).
    """
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        from flowherd.errors import ConfigError

        raise ConfigError("reading Chakra traces needs the protobuf package: pip install "
                          "'flowherd[chakra]' (workload.jobs[].chakra)") from None
    F = descriptor_pb2.FieldDescriptorProto
    scalar = {name: getattr(F, f"TYPE_{name.upper()}") for name in _SCALARS}
    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    fd = descriptor_pb2.FileDescriptorProto(name="flowherd_chakra_et_def.proto", package=PACKAGE,
                                            syntax="proto3")

    def message(name: str, fields: list[tuple[str, int, Any, Any]], oneof: str | None = None) -> None:
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, ftype, label in fields:
            f = m.field.add(name=fname, number=number, label=label)
            if isinstance(ftype, str):  # a message or enum of the package
                f.type = F.TYPE_ENUM if ftype == "NodeType" else F.TYPE_MESSAGE
                f.type_name = f".{PACKAGE}.{ftype}"
            else:
                f.type = ftype
            if oneof and number >= 3:
                f.oneof_index = 0

    attr_fields: list[tuple[str, int, Any, Any]] = [("name", 1, scalar["string"], opt),
                                                    ("doc_string", 2, scalar["string"], opt)]
    for i, (s, lst) in enumerate(zip(_SCALARS, _LISTS, strict=True)):
        attr_fields.append((f"{s}_val", 3 + 2 * i, scalar[s], opt))
        attr_fields.append((f"{s}_list", 4 + 2 * i, lst, opt))
    message("AttributeProto", attr_fields, oneof="value")
    for s, lst in zip(_SCALARS, _LISTS, strict=True):
        message(lst, [("values", 1, scalar[s], rep)])
    message("GlobalMetadata", [("version", 1, scalar["string"], opt), ("attr", 2, "AttributeProto", rep)])
    enum = fd.enum_type.add(name="NodeType")
    for v in NodeType:
        enum.value.add(name=v.name, number=int(v))
    enum = fd.enum_type.add(name="CollectiveCommType")
    for v in CollectiveCommType:
        enum.value.add(name=v.name, number=int(v))
    u64, s = scalar["uint64"], scalar["string"]
    message("Node", [("id", 1, u64, opt), ("name", 2, s, opt), ("type", 3, "NodeType", opt),
                     ("ctrl_deps", 4, u64, rep), ("data_deps", 5, u64, rep),
                     ("start_time_micros", 6, u64, opt), ("duration_micros", 7, u64, opt),
                     ("inputs", 8, "IOInfo", opt), ("outputs", 9, "IOInfo", opt),
                     ("attr", 10, "AttributeProto", rep)])
    message("IOInfo", [("values", 1, s, opt), ("shapes", 2, s, opt), ("types", 3, s, opt)])
    message("Tensor", [("tensor_id", 1, u64, opt), ("storage_id", 2, u64, opt), ("offset", 3, u64, opt),
                       ("num_elem", 4, u64, opt), ("elem_bytes", 5, u64, opt), ("device", 6, s, opt)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    names = ["AttributeProto", *_LISTS, "GlobalMetadata", "Node", "IOInfo", "Tensor"]
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{n}")) for n in names}
