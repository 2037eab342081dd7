"""Just enough ELF to check an object file before a loader is given it.

A cached kernel is machine code that MCJIT (CPU) or the CUDA driver (cubin) maps and
jumps into. The cache's checksum only says the bytes are the ones written; it does not
say they are an object at all (a random payload under a good header), which kernel they
hold (an entry copied under another name), or that the loader can handle them: MCJIT
aborts the process on an external symbol it cannot resolve and on a relocation type it
does not implement. llvmlite exposes an object's sections but not its symbols or
relocations, and parses whatever it is given, so :func:`check_object` reads the ELF
structures itself: header, section table bounds, the symbol table and its strings,
every relocation (its symbol, type and offset), and the symbols the caller needs.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

ET_REL, ET_EXEC = 1, 2
EM_386, EM_X86_64, EM_CUDA = 3, 62, 190
_SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 3, 4, 8, 9
_SHF_EXECINSTR = 0x4
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS, _SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_FUNC = 2

# x86-64 relocations RuntimeDyldELF resolves, with the bytes each one patches. LLVM's
# large code model (MCJIT's default) emits R_X86_64_64; the rest are the small-model and
# GOT forms. Anything else is rejected rather than handed to a loader that may abort.
X86_64_RELOCATIONS: Mapping[int, int] = {
    0: 0,    # NONE
    1: 8,    # 64
    2: 4,    # PC32
    4: 4,    # PLT32
    9: 4,    # GOTPCREL
    10: 4,   # 32
    11: 4,   # 32S
    24: 8,   # PC64
    25: 8,   # GOTOFF64
    41: 4,   # GOTPCRELX
    42: 4,   # REX_GOTPCRELX
}


class ElfError(ValueError):
    """The bytes are not a well-formed ELF file of the expected kind; says what is wrong."""


@dataclass(frozen=True)
class Section:
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    bind: int
    type: int
    shndx: int
    value: int
    size: int

    @property
    def defined(self) -> bool:
        return self.shndx != _SHN_UNDEF


@dataclass(frozen=True)
class Relocation:
    section: int      # the section it patches
    offset: int
    symbol: int
    type: int


@dataclass(frozen=True)
class ElfFile:
    elf_class: int    # 1: 32-bit, 2: 64-bit
    little: bool
    file_type: int
    machine: int
    sections: tuple[Section, ...]
    symbols: tuple[Symbol, ...]
    relocations: tuple[Relocation, ...]


@dataclass(frozen=True)
class _Layout:
    header: struct.Struct
    section: struct.Struct
    symbol: struct.Struct
    rela: struct.Struct
    rel: struct.Struct
    sym_shift: int


def _layout(elf_class: int, order: str) -> _Layout:
    if elf_class == 2:
        return _Layout(struct.Struct(order + "16sHHIQQQIHHHHHH"),
                       struct.Struct(order + "IIQQQQIIQQ"), struct.Struct(order + "IBBHQQ"),
                       struct.Struct(order + "QQq"), struct.Struct(order + "QQ"), 32)
    return _Layout(struct.Struct(order + "16sHHIIIIIHHHHHH"),
                   struct.Struct(order + "IIIIIIIIII"), struct.Struct(order + "IIIBBH"),
                   struct.Struct(order + "IIi"), struct.Struct(order + "II"), 8)


def parse(data: bytes) -> ElfFile:
    """The header, sections, symbols and relocations of ``data``; ElfError naming the
    first structure that is out of bounds or malformed."""
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file (no \\x7fELF magic)")
    elf_class, encoding, version = data[4], data[5], data[6]
    if elf_class not in (1, 2) or encoding not in (1, 2) or version != 1:
        raise ElfError(f"bad ELF identification (class {elf_class}, data {encoding}, "
                       f"version {version})")
    lay = _layout(elf_class, "<" if encoding == 1 else ">")
    if len(data) < lay.header.size:
        raise ElfError(f"truncated ELF header ({len(data)} bytes)")
    (_, e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
     shstrndx) = lay.header.unpack_from(data)
    if shentsize != lay.section.size or not 0 < shnum < _SHN_LORESERVE or shstrndx >= shnum:
        raise ElfError(f"bad section table (entry size {shentsize}, {shnum} sections, "
                       f"names in {shstrndx})")
    if shoff + shnum * shentsize > len(data):
        raise ElfError(f"section table at {shoff} runs past the end ({len(data)} bytes)")
    sections = tuple(_section(data, lay, shoff + i * shentsize, i) for i in range(shnum))
    symtabs = [i for i, s in enumerate(sections) if s.type == _SHT_SYMTAB]
    if len(symtabs) != 1:
        raise ElfError(f"{len(symtabs)} symbol tables, expected one")
    symbols = _symbols(data, lay, sections, symtabs[0])
    relocations = tuple(r for i, s in enumerate(sections) if s.type in (_SHT_RELA, _SHT_REL)
                        for r in _relocations(data, lay, sections, i, symtabs[0], len(symbols)))
    return ElfFile(elf_class, encoding == 1, e_type, machine, sections, symbols, relocations)


def _section(data: bytes, lay: _Layout, at: int, index: int) -> Section:
    _, kind, flags, _, offset, size, link, info, _, entsize = lay.section.unpack_from(data, at)
    if kind != _SHT_NOBITS and offset + size > len(data):
        raise ElfError(f"section {index} ({offset}+{size}) runs past the end "
                       f"({len(data)} bytes)")
    return Section(kind, flags, offset, size, link, info, entsize)


def _symbols(data: bytes, lay: _Layout, sections: tuple[Section, ...],
             index: int) -> tuple[Symbol, ...]:
    tab = sections[index]
    if tab.entsize != lay.symbol.size or tab.size % lay.symbol.size:
        raise ElfError(f"symbol table entry size {tab.entsize}, size {tab.size}")
    if tab.link >= len(sections) or sections[tab.link].type != _SHT_STRTAB:
        raise ElfError(f"symbol table names its strings in section {tab.link}, "
                       f"which is not a string table")
    strings = data[sections[tab.link].offset:sections[tab.link].offset + sections[tab.link].size]
    out = []
    for at in range(tab.offset, tab.offset + tab.size, lay.symbol.size):
        if lay.symbol.size == 24:
            name_at, info, _, shndx, value, size = lay.symbol.unpack_from(data, at)
        else:
            name_at, value, size, info, _, shndx = lay.symbol.unpack_from(data, at)
        end = strings.find(b"\0", name_at)
        if name_at >= len(strings) or end < 0:
            raise ElfError(f"symbol {len(out)}: name offset {name_at} outside its strings")
        if shndx not in (_SHN_UNDEF, _SHN_ABS, _SHN_COMMON) and shndx >= len(sections):
            raise ElfError(f"symbol {len(out)}: section index {shndx} of {len(sections)}")
        out.append(Symbol(strings[name_at:end].decode("utf-8", "replace"), info >> 4,
                          info & 0xF, shndx, value, size))
    return tuple(out)


def _relocations(data: bytes, lay: _Layout, sections: tuple[Section, ...], index: int,
                 symtab: int, nsyms: int) -> list[Relocation]:
    sec = sections[index]
    entry = lay.rela if sec.type == _SHT_RELA else lay.rel
    if sec.entsize != entry.size or sec.size % entry.size:
        raise ElfError(f"relocation section {index}: entry size {sec.entsize}, size {sec.size}")
    if sec.link != symtab or sec.info >= len(sections):
        raise ElfError(f"relocation section {index}: symbols in {sec.link}, patches {sec.info}")
    out = []
    for at in range(sec.offset, sec.offset + sec.size, entry.size):
        offset, info = entry.unpack_from(data, at)[:2]
        sym, kind = info >> lay.sym_shift, info & ((1 << lay.sym_shift) - 1)
        if sym >= nsyms:
            raise ElfError(f"relocation section {index}: symbol {sym} of {nsyms}")
        out.append(Relocation(sec.info, offset, sym, kind))
    return out


def check_object(data: bytes, *, machine: int, file_type: int, elf_class: int, little: bool,
                 defines: Collection[str], only_these: bool = False,
                 resolves: Callable[[str], bool] | None = None,
                 relocation_types: Mapping[int, int] | None = None) -> str | None:
    """None when ``data`` is an ELF file of ``file_type`` for ``machine`` that defines
    every name in ``defines`` as a global function in an executable section (and, with
    ``only_these``, no other global symbol); whose undefined symbols all pass
    ``resolves``; and whose relocations all have a type in ``relocation_types`` (type ->
    bytes patched) and patch bytes inside their section. Otherwise the first reason
    it fails, for a cache's log and warnings."""
    try:
        elf = parse(data)
    except ElfError as e:
        return str(e)
    if (elf.elf_class, elf.little, elf.file_type, elf.machine) != (elf_class, little,
                                                                   file_type, machine):
        return (f"ELF class {elf.elf_class}, little-endian {elf.little}, type {elf.file_type}, "
                f"machine {elf.machine}; expected {elf_class}, {little}, {file_type}, "
                f"{machine}")
    problem = _check_symbols(elf, defines, only_these, resolves)
    if problem is None and relocation_types is not None:
        problem = _check_relocations(elf, relocation_types)
    return problem


def _check_symbols(elf: ElfFile, defines: Collection[str], only_these: bool,
                   resolves: Callable[[str], bool] | None) -> str | None:
    functions = {}
    for sym in elf.symbols:
        if sym.bind not in (_STB_GLOBAL, _STB_WEAK) or not sym.name:
            continue
        if not sym.defined:
            if resolves is not None and not resolves(sym.name):
                return f"undefined symbol {sym.name!r} does not resolve in this process"
            continue
        if only_these and sym.name not in defines:
            return f"defines {sym.name!r}, which it should not"
        functions[sym.name] = sym
    for name in defines:
        sym = functions.get(name)
        if sym is None:
            return f"does not define {name!r}"
        if sym.type != _STT_FUNC or sym.shndx >= len(elf.sections) or \
                not elf.sections[sym.shndx].flags & _SHF_EXECINSTR:
            return f"{name!r} is not a function in an executable section"
        if elf.file_type == ET_REL and sym.value + sym.size > elf.sections[sym.shndx].size:
            return f"{name!r} ({sym.value}+{sym.size}) runs past its section"
    return None


def _check_relocations(elf: ElfFile, types: Mapping[int, int]) -> str | None:
    for rel in elf.relocations:
        width = types.get(rel.type)
        if width is None:
            return f"relocation type {rel.type} is not one this loader handles"
        target = elf.sections[rel.section]
        if rel.offset + width > target.size:
            return f"relocation at {rel.offset} patches past its section ({target.size} bytes)"
    return None
