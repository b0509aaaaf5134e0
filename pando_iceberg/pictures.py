"""Pictures of a layout, like the paper's Fig. 2c and Fig. 5 (§2, §6.2).

One PNG, readable at a glance:

- top: each truncated tree (§6.2, last step) as a node-link diagram, TRUE child on the left,
  the cut on inner nodes and "→ B3, B7" (the blocks the leaf points to) on leaves;
- bottom left (k ≥ 2): the k-tuple grid of Fig. 5 — rows are the leaves of tree 0, columns the
  leaves of tree 1 (non-truncated trees, left-to-right order), each cell coloured by the block
  its k-tuple maps to, with the block number in it. Dashed lines mark where the truncated
  trees' leaves change, the paper's orange/blue dotted partition boundaries;
- bottom right: rows per block.

Matplotlib runs on the Agg backend: no display is needed, nothing global is switched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["block_colors", "draw_layout", "shorten"]

#: Shown per tree before deeper subtrees collapse into "… N more nodes".
MAX_DEPTH = 6
#: Leaves (and collapsed stubs) side by side in one tree panel, at most.
MAX_FRONTIER = 24
#: Grid cells carry their block number while the grid has at most this many rows/columns.
MAX_GRID_TEXT = 40
CUT_CHARS = 40
TREE_COLORS = ("#e08214", "#2166ac", "#1b7837", "#762a83")  # tree 0 orange, tree 1 blue (Fig. 2c)
MAX_FIG_WIDTH = 24.0


def shorten(text: str, n: int = CUT_CHARS) -> str:
    """``text`` on one line, at most ``n`` characters (ending in … when cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _wrap(text: str, width: int) -> str:
    """Break ``text`` into lines of about ``width`` characters at spaces (2 lines at most)."""
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width + 1)
    if cut <= 0:
        cut = width
    rest = text[cut:].strip()
    if len(rest) > width:
        rest = rest[: width - 1] + "…"
    return text[:cut].rstrip() + "\n" + rest


def block_colors(num_blocks: int) -> np.ndarray:
    """An RGBA colour per block: a categorical palette (tab10, then tab20/b/c), cycled."""
    from matplotlib import colormaps

    if num_blocks <= 10:
        palette = [colormaps["tab10"](i) for i in range(10)]
    else:
        palette = ([colormaps["tab20"](i) for i in range(20)] + [colormaps["tab20b"](i) for i in range(20)]
                   + [colormaps["tab20c"](i) for i in range(20)])
    return np.array([palette[b % len(palette)] for b in range(max(num_blocks, 0))], dtype=float).reshape(-1, 4)


def _ink(rgba: Sequence[float]) -> str:
    """Black or white text, whichever reads better on ``rgba``."""
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


# --------------------------------------------------------------------------- tree geometry


def _in_order_leaves(tree: Any) -> list[int]:
    """Leaves left to right, TRUE child first (the order the tree diagram draws them)."""
    out, stack = [], [0]
    while stack:
        n = stack.pop()
        if tree.node_cut[n] is None:
            out.append(n)
        else:
            stack.append(tree.not_true_child[n])
            stack.append(tree.true_child[n])
    return out


def _subtree_sizes(tree: Any) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for n in reversed(tree._reachable()):  # ids grow from parent to child: children first
        sizes[n] = 1 if tree.node_cut[n] is None else 1 + sizes[tree.true_child[n]] + sizes[tree.not_true_child[n]]
    return sizes


def _frontier(tree: Any, max_depth: int) -> int:
    """Nodes drawn at the bottom of the picture when showing ``max_depth`` levels."""
    count, stack = 0, [(0, 0)]
    while stack:
        n, d = stack.pop()
        if tree.node_cut[n] is None or d >= max_depth:
            count += 1
        else:
            stack += [(tree.true_child[n], d + 1), (tree.not_true_child[n], d + 1)]
    return count


@dataclass
class _TreeShape:
    depth_shown: int
    x: dict[int, float] = field(default_factory=dict)
    y: dict[int, int] = field(default_factory=dict)
    stubs: dict[int, int] = field(default_factory=dict)  # collapsed node → nodes hidden under it
    edges: list[tuple[int, int, bool]] = field(default_factory=list)  # parent, child, is TRUE edge
    width: int = 1
    hidden: int = 0


def _shape(tree: Any, max_depth: int = MAX_DEPTH, max_frontier: int = MAX_FRONTIER) -> _TreeShape:
    """Positions: frontier nodes at consecutive x (in order), an inner node above its children's
    middle, y = depth. Depth is capped so at most ``max_frontier`` nodes sit side by side."""
    depth = max_depth
    while depth > 1 and _frontier(tree, depth) > max_frontier:
        depth -= 1
    sizes = _subtree_sizes(tree)
    shape = _TreeShape(depth)
    nxt = [0]

    def place(n: int, d: int) -> float:
        shape.y[n] = d
        if tree.node_cut[n] is None or d >= depth:
            if tree.node_cut[n] is not None:
                shape.stubs[n] = sizes[n]
                shape.hidden += sizes[n] - 1
            shape.x[n] = float(nxt[0])
            nxt[0] += 1
            return shape.x[n]
        t, f = tree.true_child[n], tree.not_true_child[n]
        xt, xf = place(t, d + 1), place(f, d + 1)
        shape.edges += [(n, t, True), (n, f, False)]
        shape.x[n] = (xt + xf) / 2
        return shape.x[n]

    place(0, 0)
    shape.width = max(nxt[0], 1)
    return shape


def _blocks_text(blocks: Sequence[int], width: int = 40, max_lines: int = 2) -> str:
    """"→ B3, B7" in lines of about ``width`` characters; what does not fit becomes "+N"."""
    names = [f"B{int(b)}" for b in blocks]
    if not names:
        return "→ (no block)"
    lines: list[str] = []
    cur, shown = "→", 0
    for i, name in enumerate(names):
        piece = (" " if cur == "→" else ", ") + name
        tail = f" +{len(names) - i - 1}" if i < len(names) - 1 else ""
        if len(cur) + len(piece) + len(tail) > width and cur not in ("→", ""):
            if len(lines) + 1 >= max_lines:
                break
            lines.append(cur + ",")
            cur, piece = "", name
        cur += piece
        shown += 1
    if shown < len(names):
        cur += f" +{len(names) - shown}"
    return "\n".join(lines + [cur])


def _stub_blocks(tree: Any, node: int, leaf_blocks: Mapping[int, Any]) -> list[int]:
    """Blocks under a collapsed subtree (union over its leaves)."""
    out: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if tree.node_cut[n] is None:
            out.update(int(b) for b in np.asarray(leaf_blocks.get(n, ()), dtype=np.int64))
        else:
            stack += [tree.true_child[n], tree.not_true_child[n]]
    return sorted(out)


def _draw_tree(ax: Any, tree: Any, leaf_blocks: Mapping[int, Any], colors: np.ndarray, shape: _TreeShape,
               title: str, title_color: str, width_in: float) -> None:
    from matplotlib.patches import Rectangle

    ax.set_axis_off()
    ax.set_title(title, color=title_color, fontsize=11, fontweight="bold", loc="left")
    levels = max(shape.y.values()) + 1
    ax.set_xlim(-0.6, shape.width - 0.4)
    ax.set_ylim(levels - 0.35, -0.55)
    # Characters that fit in one slot: ~0.075 in per character at 7 pt.
    slot_in = width_in / max(shape.width, 1)
    font = 9.0 if slot_in >= 1.6 else 8.0 if slot_in >= 1.1 else 6.5
    chars = max(8, int((slot_in - 0.15) / (0.0095 * font)))
    inner_wrap = max(10, min(chars, 26))
    for p, c, is_true in shape.edges:
        ax.plot([shape.x[p], shape.x[c]], [shape.y[p] + 0.18, shape.y[c] - 0.22], color="#888888", lw=1, zorder=1)
        mx, my = (shape.x[p] + shape.x[c]) / 2, (shape.y[p] + shape.y[c]) / 2
        ax.text(mx, my, "T" if is_true else "¬T", fontsize=font - 1, color="#1a9850" if is_true else "#d73027",
                ha="right" if is_true else "left", va="center", zorder=2)
    box = dict(boxstyle="round,pad=0.3", lw=0.8)
    for n in shape.x:
        x, y = shape.x[n], shape.y[n]
        cut = tree.node_cut[n]
        if n in shape.stubs:
            blocks = _stub_blocks(tree, n, leaf_blocks)
            text = f"…{shape.stubs[n] - 1} more nodes\n{len(blocks)} blocks"
            ax.text(x, y, text, ha="center", va="center", fontsize=font, zorder=3, style="italic",
                    bbox={**box, "fc": "#eeeeee", "ec": "#999999", "ls": "--"})
        elif cut is not None:
            text = _wrap(shorten(cut.key), inner_wrap)
            ax.text(x, y, text, ha="center", va="center", fontsize=font, zorder=3,
                    bbox={**box, "fc": "#fff7e6" if title_color == TREE_COLORS[0] else "#f2f6fb", "ec": title_color})
        else:
            blocks = [int(b) for b in np.asarray(leaf_blocks.get(n, ()), dtype=np.int64)]
            text = f"#{n}\n" + _blocks_text(blocks, max(chars, 9))
            ax.text(x, y - 0.05, text, ha="center", va="center", fontsize=font, zorder=3,
                    bbox={**box, "fc": "white", "ec": "#444444"})
            # a strip of the leaf's block colours under the label, so it matches the grid/bars
            shown = blocks[:8]
            if shown:
                w = min(0.8, 0.16 * len(shown))
                for i, b in enumerate(shown):
                    ax.add_patch(Rectangle((x - w / 2 + i * w / len(shown), y + 0.27), w / len(shown), 0.1,
                                           fc=colors[b % len(colors)], ec="white", lw=0.5, zorder=3))
    if shape.hidden:
        ax.text(1.0, 0.0, f"depth shown ≤ {shape.depth_shown}; … {shape.hidden} more nodes",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="#666666")


# --------------------------------------------------------------------------- k-tuple grid


def _grid(layout: Any) -> tuple[list[int], list[int], np.ndarray, list[list[int]]]:
    """Rows (tree 0 leaves), columns (tree 1 leaves), the majority block per cell (-1: empty)
    and every cell's distinct blocks (several when k ≥ 3)."""
    rows, cols = _in_order_leaves(layout.trees[0]), _in_order_leaves(layout.trees[1])
    r_of = {n: i for i, n in enumerate(rows)}
    c_of = {n: i for i, n in enumerate(cols)}
    kts = np.asarray(layout.ktuples)
    blocks = np.asarray(layout.ktuple_block)
    cell = np.full((len(rows), len(cols)), -1, dtype=np.int64)
    cell_blocks: list[list[int]] = [[] for _ in range(len(rows) * len(cols))]
    if len(kts):
        ri = np.array([r_of.get(int(x), -1) for x in kts[:, 0]])
        ci = np.array([c_of.get(int(x), -1) for x in kts[:, 1]])
        ok = (ri >= 0) & (ci >= 0)
        flat = ri[ok] * len(cols) + ci[ok]
        # majority block per cell, weighted by the block's rows (k ≥ 3: several k-tuples per cell)
        pairs, counts = np.unique(np.stack([flat, blocks[ok]], axis=1), axis=0, return_counts=True)
        for f, b in pairs:
            cell_blocks[int(f)].append(int(b))
        best: dict[int, tuple[int, int, int]] = {}  # cell → (block, k-tuples, block rows)
        for (f, b), cnt in zip(pairs, counts):
            score = (int(cnt), int(layout.block_rows[b]) if b < len(layout.block_rows) else 0)
            if int(f) not in best or score > best[int(f)][1:]:
                best[int(f)] = (int(b), *score)
        for f, (b, *_rest) in best.items():
            cell[f // len(cols), f % len(cols)] = b
    return rows, cols, cell, cell_blocks


def _boundaries(order: Sequence[int], truncated: Any) -> list[float]:
    """Positions between consecutive leaves whose truncated leaf differs."""
    cover = [truncated.covering_leaf(n) for n in order]
    return [i + 0.5 for i in range(len(cover) - 1) if cover[i] != cover[i + 1]]


def _draw_grid(ax: Any, layout: Any, colors: np.ndarray) -> None:
    rows, cols, cell, cell_blocks = _grid(layout)
    img = np.ones((len(rows), len(cols), 4))
    filled = cell >= 0
    img[filled] = colors[cell[filled] % len(colors)]
    ax.imshow(img, aspect="auto", interpolation="nearest")
    nr, nc = len(rows), len(cols)
    if max(nr, nc) <= MAX_GRID_TEXT:
        font = 9 if max(nr, nc) <= 12 else 7 if max(nr, nc) <= 24 else 5
        for i in range(nr):
            for j in range(nc):
                b = int(cell[i, j])
                if b < 0:
                    continue
                extra = len(cell_blocks[i * nc + j]) - 1
                ax.text(j, i, f"B{b}" + (f"+{extra}" if extra else ""), ha="center", va="center",
                        fontsize=font, color=_ink(colors[b % len(colors)]))
        ax.set_xticks(range(nc), [f"#{n}" for n in cols], rotation=90, fontsize=7)
        ax.set_yticks(range(nr), [f"#{n}" for n in rows], fontsize=7)
        ax.set_xticks(np.arange(-0.5, nc, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, nr, 1), minor=True)
        ax.grid(which="minor", color="white", lw=0.6)
        ax.tick_params(which="minor", length=0)
    # Truncation merged some leaves: dashed lines show the truncated leaves' boundaries.
    xs, ys = _boundaries(cols, layout.truncated[1]), _boundaries(rows, layout.truncated[0])
    if len(xs) < nc - 1:
        for x in xs:
            ax.axvline(x, color=TREE_COLORS[1], ls="--", lw=1.6)
    if len(ys) < nr - 1:
        for y in ys:
            ax.axhline(y, color=TREE_COLORS[0], ls="--", lw=1.6)
    ax.set_ylabel(f"tree 0 leaves ({nr})", color=TREE_COLORS[0], fontweight="bold")
    ax.set_xlabel(f"tree 1 leaves ({nc})", color=TREE_COLORS[1], fontweight="bold")
    note = ("cell = k-tuple's block (majority; +n: more blocks, other trees)" if layout.k > 2
            else "cell = k-tuple's block")
    ax.set_title(f"k-tuples of trees 0 × 1 ({int(filled.sum())} cells used); {note}", fontsize=10, loc="left")


# --------------------------------------------------------------------------- block sizes


def _draw_bars(ax: Any, layout: Any, block_files: Mapping[int, list] | None, colors: np.ndarray) -> None:
    rows = np.asarray(layout.block_rows, dtype=np.int64)
    nb = len(rows)
    x = np.arange(nb)
    ax.bar(x, rows, color=colors[x % len(colors)] if nb else None, edgecolor="#333333" if nb <= 60 else "none",
           lw=0.4, width=0.85 if nb <= 200 else 1.0)
    title = f"rows per block ({nb} blocks, {int(rows.sum()):,} rows)"
    if block_files is not None:
        nfiles = sum(len(v) for v in block_files.values())
        title += f"; {nfiles} data files"
        if nb <= 40:
            for b in range(nb):
                n = len(block_files.get(b, []))
                ax.text(b, rows[b], f"{n}f", ha="center", va="bottom", fontsize=7, color="#444444")
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel("block")
    ax.set_ylabel("rows")
    if nb <= 40:
        ax.set_xticks(x, [f"B{b}" for b in x], rotation=90 if nb > 16 else 0, fontsize=7 if nb > 16 else 8)
    if nb:
        ax.set_xlim(-0.6, nb - 0.4)
    ax.spines[["top", "right"]].set_visible(False)
    ax.ticklabel_format(axis="y", style="plain")


# --------------------------------------------------------------------------- the figure


def _pack(widths: Sequence[float], max_width: float) -> list[list[int]]:
    """Trees into rows of panels whose widths sum to at most ``max_width`` (in order)."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for i, w in enumerate(widths):
        if rows[-1] and used + w > max_width:
            rows.append([])
            used = 0.0
        rows[-1].append(i)
        used += w
    return rows


def draw_layout(layout: Any, block_files: Mapping[int, list] | None, path: str, title: str = "") -> str:
    """Draw ``layout`` (a ``pando_iceberg.layout.Layout``) to the PNG ``path``; returns the path.

    ``block_files``: the sidecar's block → data files (optional), counted on the bars."""
    # Figure + the Agg canvas directly: no pyplot, no global backend switch, no display.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    nb = int(layout.num_blocks)
    colors = block_colors(max(nb, 1))
    shapes = [_shape(t) for t in layout.truncated]
    widths = [min(MAX_FIG_WIDTH, max(4.0, 1.4 * s.width + 0.6)) for s in shapes]
    tree_rows = _pack(widths, MAX_FIG_WIDTH)
    # a row's height follows its deepest drawn tree
    row_heights = [1.0 + 0.95 * max(max(shapes[t].y.values()) + 1 for t in r) for r in tree_rows]
    grid_n = max(len(layout.trees[0].leaves()), len(layout.trees[1].leaves())) if layout.k >= 2 else 0
    bottom_h = min(11.0, max(4.5, 0.3 * grid_n + 2.0)) if layout.k >= 2 else 3.5
    fig_w = max(12.0, max(sum(widths[t] for t in r) for r in tree_rows))
    fig_h = sum(row_heights) + bottom_h + 0.9

    fig = Figure(figsize=(fig_w, fig_h), dpi=100)
    FigureCanvasAgg(fig)
    outer = fig.add_gridspec(len(tree_rows) + 1, 1, height_ratios=[*row_heights, bottom_h],
                             left=0.8 / fig_w, right=1 - 0.25 / fig_w, top=1 - 0.75 / fig_h, bottom=0.9 / fig_h,
                             hspace=0.25)
    for r_i, r in enumerate(tree_rows):
        ws = [widths[t] for t in r]
        pad = fig_w - sum(ws)
        sub = outer[r_i].subgridspec(1, len(r) + (1 if pad > 0.5 else 0),
                                     width_ratios=ws + ([pad] if pad > 0.5 else []), wspace=0.05)
        for j, t in enumerate(r):
            ax = fig.add_subplot(sub[0, j])
            tree = layout.truncated[t]
            n_leaves = len(tree.leaves())
            _draw_tree(ax, tree, layout.leaf_blocks[t], colors, shapes[t],
                       f"tree {t}: {len(tree.inner_nodes())} cuts, {n_leaves} leaves (truncated)",
                       TREE_COLORS[t % len(TREE_COLORS)], widths[t])
    if layout.k >= 2:
        sub = outer[-1].subgridspec(1, 2, width_ratios=[1.25, 1.0], wspace=0.18)
        _draw_grid(fig.add_subplot(sub[0, 0]), layout, colors)
        _draw_bars(fig.add_subplot(sub[0, 1]), layout, block_files, colors)
    else:
        _draw_bars(fig.add_subplot(outer[-1]), layout, block_files, colors)
    head = title or "Pando layout"
    fig.suptitle(f"{head} — k={layout.k}, {nb} blocks, {int(np.sum(layout.block_rows)):,} rows",
                 fontsize=13, fontweight="bold", x=0.8 / fig_w, ha="left", y=1 - 0.2 / fig_h, va="top")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path
