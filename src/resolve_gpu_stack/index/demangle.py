"""A best-effort Itanium C++ demangler, for messages: ``_ZN3c106detail14torchCheckFailEPKcS2_j...``
-> ``c10::detail::torchCheckFail(char const*, char const*, unsigned int, ...)``, written as
``c++filt`` writes it.

It covers what shared objects import in practice: nested names, constructors and destructors,
operators, ABI tags, builtin types, qualifiers, pointers and references (collapsed as C++ does),
function and array types, pointers to members, substitutions (``S_``, ``S0_``, ``St``, ``Sa``,
``Ss``...), template arguments and parameters, packs, literals, local names, lambdas, special names
(``_ZTV`` vtable, ``_ZTI`` typeinfo...), clone suffixes. Anything else (expressions, decltype,
vendor qualifiers) makes ``demangle`` give the name back unchanged; it never raises. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_INPUT = 16 * 2**10  # longer names are given back as they are
MAX_OUTPUT = 64 * 2**10  # substitutions can make a short name expand without bound
MAX_DEPTH = 200

_BUILTIN = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
_BUILTIN_D = {
    "Dn": "decltype(nullptr)",
    "Da": "auto",
    "Dc": "decltype(auto)",
    "Ds": "char16_t",
    "Di": "char32_t",
    "Du": "char8_t",
    "Dh": "half",
    "Df": "decimal32",
    "Dd": "decimal64",
    "De": "decimal128",
}
_LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}
_OPERATORS = {
    "nw": "new",
    "na": "new[]",
    "dl": "delete",
    "da": "delete[]",
    "ps": "+",
    "ng": "-",
    "ad": "&",
    "de": "*",
    "co": "~",
    "pl": "+",
    "mi": "-",
    "ml": "*",
    "dv": "/",
    "rm": "%",
    "an": "&",
    "or": "|",
    "eo": "^",
    "aS": "=",
    "pL": "+=",
    "mI": "-=",
    "mL": "*=",
    "dV": "/=",
    "rM": "%=",
    "aN": "&=",
    "oR": "|=",
    "eO": "^=",
    "ls": "<<",
    "rs": ">>",
    "lS": "<<=",
    "rS": ">>=",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "gt": ">",
    "le": "<=",
    "ge": ">=",
    "ss": "<=>",
    "nt": "!",
    "aa": "&&",
    "oo": "||",
    "pp": "++",
    "mm": "--",
    "cm": ",",
    "pm": "->*",
    "pt": "->",
    "cl": "()",
    "ix": "[]",
    "qu": "?",
    "aw": "co_await",
}
_SPECIAL = {"TV": "vtable for ", "TT": "VTT for ", "TI": "typeinfo for ", "TS": "typeinfo name for "}
_STD_SUBS = {
    "a": ("std::allocator", "allocator"),
    "b": ("std::basic_string", "basic_string"),
    "s": ("std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "basic_string"),
    "i": ("std::basic_istream<char, std::char_traits<char> >", "basic_istream"),
    "o": ("std::basic_ostream<char, std::char_traits<char> >", "basic_ostream"),
    "d": ("std::basic_iostream<char, std::char_traits<char> >", "basic_iostream"),
}
_CLONE = re.compile(r"\.[A-Za-z_][A-Za-z0-9_]*(?:\.[0-9]+)*")


END = "\x00"  # what ``peek`` gives past the end of the name


class _Fail(Exception):
    """Not something this demangler reads."""


# -- nodes: types and names, printed as a left and a right part (a declarator around a name) ---------


class _Node:
    def left(self) -> str:
        raise NotImplementedError

    def right(self) -> str:
        return ""

    def text(self) -> str:
        out = self.left() + self.right()
        if len(out) > MAX_OUTPUT:
            raise _Fail("output too long")
        return out

    @property
    def base(self) -> str:
        """The unqualified name without template arguments (a constructor's name)."""
        return self.text()


class _Name(_Node):
    def __init__(self, text: str, base: str | None = None) -> None:
        self._text = text
        self._base = base if base is not None else text

    def left(self) -> str:
        return self._text

    @property
    def base(self) -> str:
        return self._base


class _Qualified(_Node):
    """``outer::inner``."""

    def __init__(self, outer: _Node, inner: _Node) -> None:
        self.outer, self.inner = outer, inner

    def left(self) -> str:
        return f"{self.outer.text()}::{self.inner.text()}"

    @property
    def base(self) -> str:
        return self.inner.base


class _Template(_Node):
    def __init__(self, name: _Node, args: list[_Node]) -> None:
        self.name, self.args = name, args

    def left(self) -> str:
        head = self.name.text()
        inner = ", ".join(a.text() for a in _expanded(self.args))
        return f"{head}{' ' if head.endswith('<') else ''}<{inner}{' ' if inner.endswith('>') else ''}>"

    @property
    def base(self) -> str:
        return self.name.base


class _Pack(_Node):
    """A template argument pack (``J...E``): its elements, printed inline."""

    def __init__(self, items: list[_Node]) -> None:
        self.items = items

    def left(self) -> str:
        return ", ".join(i.text() for i in self.items)


class _Expansion(_Node):
    """``Dp T``: a pattern repeated for each element of the pack it names."""

    def __init__(self, pattern: _Node) -> None:
        self.pattern = pattern

    def elements(self) -> list[_Node]:
        pack = _find_pack(self.pattern)
        if pack is None:
            return [self.pattern]
        return [_replace(self.pattern, pack, item) for item in pack.items]

    def left(self) -> str:
        return ", ".join(e.text() for e in self.elements())


class _Qual(_Node):
    def __init__(self, inner: _Node, quals: str) -> None:
        self.inner, self.quals = inner, quals

    def left(self) -> str:
        if isinstance(self.inner, _Function):
            return self.inner.left()
        return self.inner.left() + self.quals

    def right(self) -> str:
        if isinstance(self.inner, _Function):
            return self.inner.right() + self.quals
        return self.inner.right()


class _Pointer(_Node):
    """``*``, ``&`` or ``&&`` to ``inner``."""

    def __init__(self, inner: _Node, sigil: str) -> None:
        self.inner, self.sigil = inner, sigil

    def left(self) -> str:
        if _declarator(self.inner):
            return self.inner.left() + (" (" if isinstance(self.inner, _Array) else "(") + self.sigil
        return self.inner.left() + self.sigil

    def right(self) -> str:
        if _declarator(self.inner):
            return ")" + self.inner.right()
        return self.inner.right()


def _declarator(node: _Node) -> bool:
    """Whether a pointer to ``node`` is written around the name: ``void (*)()``, ``int (*) [3]``."""
    return isinstance(node, (_Function, _Array)) or (isinstance(node, _Qual) and isinstance(node.inner, _Function))


class _MemberPointer(_Node):
    def __init__(self, cls: _Node, inner: _Node) -> None:
        self.cls, self.inner = cls, inner

    def left(self) -> str:
        if isinstance(self.inner, _Function):
            return f"{self.inner.left()}({self.cls.text()}::*"
        return f"{self.inner.left()} {self.cls.text()}::*"

    def right(self) -> str:
        return ")" + self.inner.right() if isinstance(self.inner, _Function) else self.inner.right()


class _Function(_Node):
    def __init__(self, ret: _Node | None, params: list[_Node], quals: str = "") -> None:
        self.ret, self.params, self.quals = ret, params, quals

    def left(self) -> str:
        if self.ret is None:
            return ""
        head = self.ret.left()
        return head if isinstance(self.ret, _Pointer) and _declarator(self.ret.inner) else head + " "

    def right(self) -> str:
        return f"({_params(self.params)}){self.quals}" + (self.ret.right() if self.ret is not None else "")


class _Array(_Node):
    def __init__(self, inner: _Node, dim: str) -> None:
        self.inner, self.dim = inner, dim

    def left(self) -> str:
        return self.inner.left()

    def right(self) -> str:
        return f" [{self.dim}]" + self.inner.right()


class _Encoding(_Node):
    """A function: ``[ret ]name(params) quals``; or data: its name."""

    def __init__(self, name: _Node, ret: _Node | None, params: list[_Node] | None, quals: str) -> None:
        self.name, self.ret, self.params, self.quals = name, ret, params, quals

    def left(self) -> str:
        if self.params is None:
            return self.name.text()
        head = (self.ret.left() + " ") if self.ret is not None else ""
        return f"{head}{self.name.text()}({_params(self.params)}){self.quals}" + (self.ret.right() if self.ret is not None else "")


def _local(function: _Node, inner: _Node) -> _Node:
    """``function::inner``, keeping the qualifiers of a method ``inner`` (a lambda's ``const``)."""
    node = _Name(f"{function.text()}::{inner.text()}", inner.base)
    node.method_quals = getattr(inner, "method_quals", "")  # type: ignore[attr-defined]
    return node


def _params(params: list[_Node]) -> str:
    items = _expanded(params)
    if len(items) == 1 and items[0].text() == "void":
        return ""
    return ", ".join(p.text() for p in items)


def _expanded(nodes: list[_Node]) -> list[_Node]:
    out: list[_Node] = []
    for n in nodes:
        if isinstance(n, _Expansion):
            out.extend(n.elements())
        elif isinstance(n, _Pack):
            out.extend(n.items)
        else:
            out.append(n)
    return out


def _find_pack(node: _Node) -> _Pack | None:
    if isinstance(node, _Pack):
        return node
    for child in (getattr(node, "inner", None), getattr(node, "ret", None)):
        if isinstance(child, _Node) and (found := _find_pack(child)) is not None:
            return found
    return None


def _replace(node: _Node, pack: _Pack, item: _Node) -> _Node:
    """``node`` with ``pack`` replaced by ``item`` (references collapsed)."""
    if node is pack:
        return item
    if isinstance(node, _Pointer):
        inner = _replace(node.inner, pack, item)
        return _reference(inner, node.sigil) if node.sigil != "*" else _Pointer(inner, "*")
    if isinstance(node, _Qual):
        return _Qual(_replace(node.inner, pack, item), node.quals)
    return node


def _reference(inner: _Node, sigil: str) -> _Node:
    """``&``/``&&`` applied to ``inner``: a reference to a reference collapses (``& &&`` -> ``&``)."""
    if isinstance(inner, _Pointer) and inner.sigil in ("&", "&&"):
        return _Pointer(inner.inner, "&" if "&" in (sigil, inner.sigil) and not (sigil == inner.sigil == "&&") else "&&")
    return _Pointer(inner, sigil)


# -- the parser -----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[_Node] = []
        self.params: list[_Node] = []
        self.depth = 0

    def peek(self, n: int = 0) -> str:
        """The character ``n`` ahead; ``END`` past the end (so ``in "..."`` tests stay false)."""
        return self.s[self.i + n] if self.i + n < len(self.s) else END

    def eat(self, prefix: str) -> bool:
        if self.s.startswith(prefix, self.i):
            self.i += len(prefix)
            return True
        return False

    def expect(self, prefix: str) -> None:
        if not self.eat(prefix):
            raise _Fail(f"expected {prefix!r} at {self.i}")

    def number(self) -> int:
        m = re.compile(r"n?[0-9]+").match(self.s, self.i)
        if not m:
            raise _Fail("expected a number")
        self.i = m.end()
        text = m.group()
        return -int(text[1:]) if text.startswith("n") else int(text)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Fail("nested too deeply")

    # encodings ---------------------------------------------------------------------------------

    def encoding(self, *, top: bool = False) -> _Node:
        self.enter()
        try:
            special = self.special()
            if special is not None:
                return special
            name, templated, ctor = self.name(top=True)
            if self.at_end_of_encoding():
                return _Encoding(name, None, None, "")
            quals = getattr(name, "method_quals", "")
            ret = self.type() if templated and not ctor else None
            params = self.bare_types()
            return _Encoding(name, ret, params, quals)
        finally:
            self.depth -= 1

    def at_end_of_encoding(self) -> bool:
        return self.peek() in ("E", ".", END)

    def bare_types(self) -> list[_Node]:
        params = []
        while not self.at_end_of_encoding():
            params.append(self.type())
        if not params:
            raise _Fail("no parameter types")
        return params

    def special(self) -> _Node | None:
        two = self.s[self.i : self.i + 2]
        if two in _SPECIAL:
            self.i += 2
            return _Name(_SPECIAL[two] + self.type().text())
        if two in ("Th", "Tv"):
            self.i += 2
            self.call_offset(two[1])
            return _Name(("non-virtual thunk to " if two == "Th" else "virtual thunk to ") + self.encoding().text())
        if two == "Tc":
            self.i += 2
            for _ in range(2):
                kind = self.peek()
                if kind not in ("h", "v"):
                    raise _Fail("bad call offset")
                self.i += 1
                self.call_offset(kind)
            return _Name("covariant return thunk to " + self.encoding().text())
        if two in ("GV", "TH", "TW"):
            self.i += 2
            what = {"GV": "guard variable for ", "TH": "TLS init function for ", "TW": "TLS wrapper function for "}[two]
            return _Name(what + self.name()[0].text())
        if two == "GR":
            self.i += 2
            name = self.name()[0].text()
            while self.peek() not in ("_", END):
                self.i += 1
            self.expect("_")
            return _Name("reference temporary for " + name)
        return None

    def call_offset(self, kind: str) -> None:
        """``h <offset> _`` or ``v <offset> _ <offset> _`` (the kind letter already read)."""
        self.number()
        self.expect("_")
        if kind == "v":
            self.number()
            self.expect("_")

    # names -------------------------------------------------------------------------------------

    def name(self, *, top: bool = False) -> tuple[_Node, bool, bool]:
        """(the name, whether it ends in template arguments, whether it is a constructor/destructor)."""
        self.enter()
        try:
            c = self.peek()
            if c == "N":
                return self.nested(top=top)
            if c == "Z":
                return self.local()
            if c == "S" and self.peek(1) != "t":
                node = self.substitution()
                if self.peek() != "I":
                    raise _Fail("a substitution as a name must take template arguments")
                return _Template(node, self.template_args(top=top)), True, False
            std = self.eat("St")
            node, ctor = self.unqualified(None)
            if std:
                node = _Qualified(_Name("std"), node)
            if self.peek() == "I":
                self.subs.append(node)
                return _Template(node, self.template_args(top=top)), True, ctor
            return node, False, ctor
        finally:
            self.depth -= 1

    def nested(self, *, top: bool) -> tuple[_Node, bool, bool]:
        self.expect("N")
        quals = self.cv_qualifiers()
        ref = self.ref_qualifier()
        prefix: _Node | None = None
        templated = ctor = False
        while not self.eat("E"):
            if self.peek() == END:
                raise _Fail("unterminated nested name")
            if prefix is None and self.peek() == "S" and self.peek(1) != "t":
                prefix, templated, ctor = self.substitution(), False, False
                continue
            prefix, templated, ctor = self.nested_part(prefix, top=top)
            self.subs.append(prefix)
        if prefix is None:
            raise _Fail("empty nested name")
        self.subs.pop()
        if quals or ref:
            prefix.method_quals = quals + ref  # type: ignore[attr-defined]
        return prefix, templated, ctor

    def nested_part(self, prefix: _Node | None, *, top: bool) -> tuple[_Node, bool, bool]:
        """``prefix`` and the next part of a nested name: (it, whether it ends in template arguments,
        whether it is a constructor/destructor)."""
        if prefix is None and self.eat("St"):
            std = _Name("std")
            node, ctor = self.unqualified(std)
            return _Qualified(std, node), False, ctor
        c = self.peek()
        if c == "I":
            if prefix is None:
                raise _Fail("template arguments with no name")
            return _Template(prefix, self.template_args(top=top)), True, False
        if c == "T":
            return self.template_param(), False, False
        if c == "D" and self.peek(1) in "tT":
            raise _Fail("decltype in a name")
        node, ctor = self.unqualified(prefix)
        return (node if prefix is None else _Qualified(prefix, node)), False, ctor

    def local(self) -> tuple[_Node, bool, bool]:
        self.expect("Z")
        function = self.encoding()
        self.expect("E")
        if self.eat("s"):
            self.discriminator()
            return _Name(function.text() + "::string literal"), False, False
        if self.eat("d"):
            if self.peek() != "_":
                self.number()
            self.expect("_")
            inner, templated, ctor = self.name()
            return _local(function, inner), templated, ctor
        inner, templated, ctor = self.name()
        self.discriminator()
        return _local(function, inner), templated, ctor

    def discriminator(self) -> None:
        if self.eat("__"):
            self.number()
            self.expect("_")
        elif self.eat("_"):
            self.number()

    def unqualified(self, scope: _Node | None) -> tuple[_Node, bool]:
        """(an unqualified name, whether it is a constructor or destructor) in ``scope``."""
        c = self.peek()
        if c.isdigit():
            return self.abi_tags(self.source_name()), False
        if (c == "C" and self.peek(1) in "12345I") or (c == "D" and self.peek(1) in "01245"):
            return self.structor(scope), True
        if c == "U":
            return self.unnamed(), False
        if c == "L":
            self.i += 1
            node = self.source_name()
            self.discriminator()
            return node, False
        return self.operator_name()

    def structor(self, scope: _Node | None) -> _Node:
        """A constructor (``C1``..``C5``, ``CI1``/``CI2`` inheriting) or destructor (``D0``..``D5``) of ``scope``."""
        constructor = self.peek() == "C"
        if scope is None:
            raise _Fail(f"{'constructor' if constructor else 'destructor'} with no class")
        self.i += 2
        if not constructor:
            return _Name("~" + scope.base)
        if self.s[self.i - 1] == "I":
            self.i += 1
            self.type()
        return _Name(scope.base)

    def operator_name(self) -> tuple[_Node, bool]:
        """(an operator's name, whether it is a conversion: one with no return type)."""
        two = self.s[self.i : self.i + 2]
        if two == "cv":
            self.i += 2
            return _Name("operator " + self.type().text()), True
        if two == "li":
            self.i += 2
            return _Name('operator"" ' + self.source_name().text()), False
        if two in _OPERATORS:
            self.i += 2
            word = _OPERATORS[two]
            return self.abi_tags(_Name("operator" + (" " if word[0].isalpha() else "") + word)), False
        raise _Fail(f"unknown name at {self.i}")

    def unnamed(self) -> _Node:
        if self.eat("Ut"):
            n = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return _Name(f"{{unnamed type#{n}}}")
        if self.eat("Ul"):
            params = []
            while not self.eat("E"):
                if self.peek() == END:
                    raise _Fail("unterminated lambda")
                params.append(self.type())
            n = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return _Name(f"{{lambda({_params(params)})#{n}}}")
        raise _Fail("vendor name")

    def source_name(self) -> _Node:
        length = self.number()
        if length <= 0 or self.i + length > len(self.s):
            raise _Fail("bad source name length")
        text = self.s[self.i : self.i + length]
        self.i += length
        if text.startswith("_GLOBAL__N"):
            return _Name("(anonymous namespace)")
        return _Name(text)

    def abi_tags(self, node: _Node) -> _Node:
        tags = ""
        while self.eat("B"):
            tags += f"[abi:{self.source_name().text()}]"
        return _Name(node.text() + tags, node.base + tags) if tags else node

    def substitution(self) -> _Node:
        self.expect("S")
        c = self.peek()
        if c in _STD_SUBS:
            self.i += 1
            text, base = _STD_SUBS[c]
            return _Name(text, base)
        if c == "_":
            self.i += 1
            index = 0
        else:
            m = re.compile(r"[0-9A-Z]+_").match(self.s, self.i)
            if not m:
                raise _Fail("bad substitution")
            self.i = m.end()
            index = int(m.group()[:-1], 36) + 1
        if index >= len(self.subs):
            raise _Fail("substitution out of range")
        return self.subs[index]

    def template_param(self) -> _Node:
        self.expect("T")
        index = 0 if self.peek() == "_" else self.number() + 1
        self.expect("_")
        if index >= len(self.params):
            raise _Fail("template parameter out of range")
        return self.params[index]

    def template_args(self, *, top: bool = False) -> list[_Node]:
        self.expect("I")
        args = []
        while not self.eat("E"):
            if self.peek() == END:
                raise _Fail("unterminated template arguments")
            args.append(self.template_arg())
        if top:
            self.params = args
        return args

    def template_arg(self) -> _Node:
        if self.peek() == "L":
            return self.literal()
        if self.eat("J"):
            items = []
            while not self.eat("E"):
                if self.peek() == END:
                    raise _Fail("unterminated pack")
                items.append(self.template_arg())
            return _Pack(items)
        if self.peek() == "X":
            raise _Fail("expression")
        return self.type()

    def literal(self) -> _Node:
        self.expect("L")
        if self.eat("_Z"):
            node = self.encoding()
            self.expect("E")
            return _Name(node.text())
        kind = self.type()
        m = re.compile(r"n?[0-9a-f]*").match(self.s, self.i)  # decimal, or a float's lowercase hex
        value = m.group() if m else ""
        self.i += len(value)
        self.expect("E")
        value = "-" + value[1:] if value.startswith("n") else value
        name = kind.text()
        if name == "bool" and value in ("0", "1"):
            return _Name("true" if value == "1" else "false")
        code = next((k for k, v in _BUILTIN.items() if v == name), None)
        if code in _LITERAL_SUFFIX:
            return _Name(value + _LITERAL_SUFFIX[code])
        return _Name(f"({name}){value}")

    # types ---------------------------------------------------------------------------------------

    def cv_qualifiers(self) -> str:
        """A run of ``r``, ``V``, ``K``, written as c++filt does: the last one first."""
        words = []
        while self.peek() in "rVK":
            words.append({"r": "restrict", "V": "volatile", "K": "const"}[self.peek()])
            self.i += 1
        return "".join(f" {w}" for w in reversed(words))

    def ref_qualifier(self) -> str:
        """A method's or function type's ``R`` (``&``) or ``O`` (``&&``), written after its parameters."""
        return " &" if self.eat("R") else " &&" if self.eat("O") else ""

    def type(self) -> _Node:
        self.enter()
        try:
            return self._type()
        finally:
            self.depth -= 1

    def _type(self) -> _Node:
        c = self.peek()
        if c in _BUILTIN:
            self.i += 1
            return _Name(_BUILTIN[c])
        two = self.s[self.i : self.i + 2]
        if two in _BUILTIN_D:
            self.i += 2
            return _Name(_BUILTIN_D[two])
        node: _Node
        if c == "S" and self.peek(1) != "t":
            node = self.substitution()
            if self.peek() != "I":
                return node  # a substitution is not a new candidate for one
            node = _Template(node, self.template_args())
        else:
            node = _TYPE_READERS.get(c, _Parser.named_type)(self)
        self.subs.append(node)
        return node

    # each reads the type its first character starts (``_TYPE_READERS``)

    def qualified_type(self) -> _Node:
        quals = self.cv_qualifiers()
        return _Qual(self.type(), quals)

    def pointer_type(self) -> _Node:
        self.i += 1
        return _Pointer(self.type(), "*")

    def reference_type(self) -> _Node:
        sigil = "&" if self.peek() == "R" else "&&"
        self.i += 1
        return _reference(self.type(), sigil)

    def function_type(self) -> _Node:
        self.i += 1
        self.eat("Y")
        ret = self.type()
        params = []
        while self.peek() not in ("E", "R", "O") or (self.peek() in "RO" and self.peek(1) != "E"):
            if self.peek() == END:
                raise _Fail("unterminated function type")
            params.append(self.type())
        ref = self.ref_qualifier()
        self.expect("E")
        return _Function(ret, params, ref)

    def array_type(self) -> _Node:
        self.i += 1
        dim = str(self.number()) if self.peek().isdigit() else ""
        self.expect("_")
        return _Array(self.type(), dim)

    def member_pointer_type(self) -> _Node:
        self.i += 1
        cls = self.type()
        return _MemberPointer(cls, self.type())

    def template_param_type(self) -> _Node:
        node = self.template_param()
        if self.peek() == "I":
            self.subs.append(node)
            node = _Template(node, self.template_args())
        return node

    def expansion_type(self) -> _Node:
        if not self.eat("Dp"):
            raise _Fail(f"unknown type at {self.i}")
        return _Expansion(self.type())

    def vendor_type(self) -> _Node:
        self.i += 1
        return self.source_name()

    def named_type(self) -> _Node:
        c = self.peek()
        if c.isdigit() or c in "NZ" or self.s.startswith("St", self.i):
            return self.name()[0]
        raise _Fail(f"unknown type at {self.i}")


_TYPE_READERS: dict[str, Callable[[_Parser], _Node]] = {
    **dict.fromkeys("rVK", _Parser.qualified_type),
    "P": _Parser.pointer_type,
    **dict.fromkeys("RO", _Parser.reference_type),
    "F": _Parser.function_type,
    "A": _Parser.array_type,
    "M": _Parser.member_pointer_type,
    "T": _Parser.template_param_type,
    "D": _Parser.expansion_type,
    "u": _Parser.vendor_type,
}


def demangle(name: str) -> str:
    """``name`` demangled as ``c++filt`` writes it; ``name`` itself when it is not a mangled C++
    name or uses what this demangler does not read. Never raises."""
    if not name.startswith("_Z") or len(name) > MAX_INPUT:
        return name
    parser = _Parser(name)
    parser.i = 2
    try:
        node = parser.encoding(top=True)
        rest = name[parser.i :]
        clones = _CLONE.findall(rest)
        if "".join(clones) != rest:
            return name
        out = node.text() + "".join(f" [clone {c}]" for c in clones)
    except (_Fail, RecursionError, IndexError, ValueError):
        return name
    return out if len(out) <= MAX_OUTPUT else name


__all__ = ["demangle"]
