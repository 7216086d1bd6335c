#!/usr/bin/env python3
"""pane2html: `tmux capture-pane -e -p` output (text with SGR escapes) on
stdin, an HTML page on stdout: one <pre>, a <span> per run of the same
colours/bold/reverse, xterm's 256-colour palette. For docs/top.png (see
scripts/top-picture.sh)."""

import html
import re
import sys

BASE = ["#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
        "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff"]
FG, BG = "#d0d0d0", "#1c1c1c"


def color256(n):
    """xterm's palette: 16 base colours, a 6x6x6 cube, 24 greys."""
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    g = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (g, g, g)


def sgr(params, st):
    """Apply one SGR sequence's parameters to st (fg, bg, bold, reverse, faint)."""
    ps = [int(p) if p else 0 for p in params.split(";")] if params else [0]
    i = 0
    while i < len(ps):
        p = ps[i]
        if p == 0:
            st.update(fg=None, bg=None, bold=False, rev=False, faint=False)
        elif p == 1:
            st["bold"] = True
        elif p == 2:
            st["faint"] = True
        elif p == 7:
            st["rev"] = True
        elif p == 22:
            st["bold"] = st["faint"] = False
        elif p == 27:
            st["rev"] = False
        elif 30 <= p <= 37 or 90 <= p <= 97:
            st["fg"] = BASE[p - 30 if p < 90 else p - 82]
        elif 40 <= p <= 47 or 100 <= p <= 107:
            st["bg"] = BASE[p - 40 if p < 100 else p - 92]
        elif p in (38, 48) and i + 1 < len(ps):
            if ps[i + 1] == 5 and i + 2 < len(ps):
                c, i = color256(ps[i + 2]), i + 2
            elif ps[i + 1] == 2 and i + 4 < len(ps):
                c, i = "#%02x%02x%02x" % tuple(ps[i + 2:i + 5]), i + 4
            else:
                c = None
            st["fg" if p == 38 else "bg"] = c
        elif p == 39:
            st["fg"] = None
        elif p == 49:
            st["bg"] = None
        i += 1


def style(st):
    fg, bg = st["fg"] or FG, st["bg"] or BG
    if st["rev"]:
        fg, bg = bg, fg
    css = "color:%s;background:%s" % (fg, bg)
    if st["bold"]:
        css += ";font-weight:bold"
    if st["faint"]:
        css += ";opacity:0.6"
    return css


def main():
    st = dict(fg=None, bg=None, bold=False, rev=False, faint=False)
    out = []
    lines = sys.stdin.read().split("\n")
    while lines and not re.sub(r"\x1b\[[0-9;]*m|\s", "", lines[-1]):
        lines.pop()  # the pane's empty rows below the view
    for part in re.split(r"(\x1b\[[0-9;]*m)", "\n".join(lines)):
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
        if m:
            sgr(m.group(1), st)
        elif part:
            text = re.sub(r"\x1b[^a-zA-Z]*[a-zA-Z]", "", part)  # other escapes: dropped
            out.append('<span style="%s">%s</span>' % (style(st), html.escape(text)))
    sys.stdout.write(
        "<!doctype html><meta charset=utf-8><body style=\"margin:0;background:%s\">"
        "<pre style=\"margin:0;padding:8px;font:13px/1.25 'DejaVu Sans Mono',monospace;color:%s\">"
        "%s</pre></body>\n" % (BG, FG, "".join(out)))


if __name__ == "__main__":
    main()
