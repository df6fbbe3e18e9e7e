"""A CPU flame graph as one self-contained SVG (pure).

Input: folded stacks (``comm;root;...;leaf -> samples``, from
:func:`pgaccel.metrics.perfprof.fold_script`).  Each box is a function; its width is the
share of samples in which it was on the stack, boxes above it are what it called.  The
x order is alphabetical (as in Brendan Gregg's flame graphs), so width is the only thing
that means time.  Kernel frames (``_[k]``) are drawn in blue, unnamed code of a stripped
binary (``[postgres]``) in grey, the rest in warm reds and yellows keyed by the name's hash,
so one function has the same colour in every graph of a report.  Hovering shows the name,
samples and share.
"""

from __future__ import annotations

import zlib
from html import escape

ROW = 16                  # pixels per stack level
MIN_WIDTH = 0.3           # boxes narrower than this are left out (they cannot be seen)


class _Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name: str) -> None:
        self.name, self.count, self.children = name, 0, {}


def build_tree(folded: dict[str, int]) -> _Node:
    root = _Node("all")
    for stack, n in folded.items():
        root.count += n
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, _Node(frame))
            node.count += n
    return root


def depth(node: _Node) -> int:
    return 1 + max((depth(c) for c in node.children.values()), default=0)


def colour(name: str) -> str:
    if name.endswith("_[k]"):
        return "rgb(120,170,225)"
    if name.startswith("[") and name.endswith("]"):
        return "rgb(180,180,180)"
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{(h >> 8) % 180 + 40},{(h >> 16) % 55})"


def boxes(root: _Node, width: float) -> list[tuple[float, int, float, _Node]]:
    """(x, level, box width, node) for every box at least MIN_WIDTH wide, root at level 0."""
    out: list[tuple[float, int, float, _Node]] = []
    if not root.count:
        return out
    scale = width / root.count

    def walk(node: _Node, x: float, level: int) -> None:
        w = node.count * scale
        if w < MIN_WIDTH:
            return
        out.append((x, level, w, node))
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            walk(child, cx, level + 1)
            cx += child.count * scale

    walk(root, 0.0, 0)
    return out


def svg(folded: dict[str, int], *, title: str = "", width: int = 1200) -> str:
    """The flame graph of ``folded`` as an <svg> element (empty samples: a note instead)."""
    root = build_tree(folded)
    if not root.count:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40" '
                f'role="img"><text x="4" y="24" font-size="13">no samples</text></svg>')
    levels = depth(root)
    top = 24 if title else 4
    height = top + levels * ROW + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" font-family="monospace" '
             f'font-size="11"><title>{escape(title or "flame graph")}</title>']
    if title:
        parts.append(f'<text x="4" y="15" font-size="13" font-family="sans-serif">'
                     f'{escape(title)} ({root.count:,} samples)</text>')
    for x, level, w, node in boxes(root, float(width)):
        y = height - 4 - (level + 1) * ROW
        share = node.count / root.count
        label = escape(node.name)
        parts.append(f'<g><title>{label}: {node.count:,} samples ({share:.1%})</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{max(w - 0.5, 0.1):.1f}" '
                     f'height="{ROW - 1}" fill="{colour(node.name)}" rx="1"/>')
        chars = int((w - 4) / 6.6)
        if chars >= 3:
            text = node.name if len(node.name) <= chars else node.name[:chars - 2] + ".."
            parts.append(f'<text x="{x + 2:.1f}" y="{y + ROW - 4}">{escape(text)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
