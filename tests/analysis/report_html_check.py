#!/usr/bin/python3
"""Strict structural check of an ember HTML report (compare, kv-quant study, sweep; used by
report_html_test and the CLI tests).

Prints one JSON object: heatmap cell counts per (part, metric), attention cells, legends,
chart points, SVG sizes, and a list of problems (unbalanced tags, scripts, external
resources, a heatmap without a colour legend, a cell or chart point without a hover
<title>, an SVG without axis names, NaN or infinity in any attribute). Exit 0 always; the
C++ tests assert on the output.
"""
import json
import re
import sys
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "source", "wbr"}


class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems = [], []
        self.heatmap = None
        self.cells, self.attn_cells, self.svgs, self.doctype = {}, 0, 0, False
        self.legends, self.points, self.sizes = 0, 0, []
        self.svg = None       # the open <svg>: {"class", "legend", "axis_names"}
        self.need_title = None  # a cell or point whose <title> must come next

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def _attrs(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "iframe", "object", "embed", "link"):
            self.problems.append("forbidden element <%s>" % tag)
        for k, v in attrs:
            if v and re.search(r"\b(nan|inf|infinity)\b", v, re.I) and k not in ("aria-label",):
                self.problems.append("non-finite value %s=%s on <%s>" % (k, v, tag))
            if k.startswith("on"):
                self.problems.append("event handler attribute %s" % k)
            if k != "xmlns" and v and ("http:" in v or "https:" in v or v.startswith("//")):
                self.problems.append("external reference %s=%s" % (k, v))
        return a

    def _title_check(self, tag):
        if self.need_title is not None and tag != "title":
            self.problems.append("%s without a <title> first" % self.need_title)
        self.need_title = None

    def handle_starttag(self, tag, attrs):
        a = self._attrs(tag, attrs)
        self._title_check(tag)
        if tag == "svg":
            self.svgs += 1
            self.svg = {"class": a.get("class", ""), "legend": False, "axis_names": 0}
            self.sizes.append([a.get("class", ""), float(a.get("width", "0")), float(a.get("height", "0"))])
        if tag == "g" and a.get("class") == "legend" and self.svg is not None:
            self.svg["legend"] = True
            self.legends += 1
        if tag == "text" and a.get("class") == "axis-name" and self.svg is not None:
            self.svg["axis_names"] += 1
        if tag in ("rect", "circle") and a.get("class") in ("cell", "attn-cell", "point"):
            self.need_title = "<%s class=%s>" % (tag, a.get("class"))
        if tag == "circle" and a.get("class") == "point":
            self.points += 1
        if tag == "svg":
            if a.get("class") == "heatmap":
                self.heatmap = (a.get("data-part"), a.get("data-metric"))
                self.cells.setdefault("%s.%s" % self.heatmap, [])
        if tag == "rect" and a.get("class") == "cell":
            if self.heatmap is None:
                self.problems.append("cell outside a heatmap")
            else:
                self.cells["%s.%s" % self.heatmap].append((a["data-layer"], a["data-head"]))
        if tag == "rect" and a.get("class") == "attn-cell":
            self.attn_cells += 1
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._attrs(tag, attrs)
        self._title_check(tag)
        if tag in ("rect", "circle") and dict(attrs).get("class") in ("cell", "attn-cell", "point"):
            self.problems.append("<%s class=%s> without a <title>" % (tag, dict(attrs).get("class")))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append("unbalanced </%s> (open: %s)" % (tag, self.stack[-3:]))
            return
        self.stack.pop()
        if tag in ("rect", "circle"):
            self._title_check(tag)
        if tag == "svg":
            v = self.svg or {}
            if "heatmap" in v.get("class", "") and not v.get("legend"):
                self.problems.append("heatmap <svg class=%s> without a colour legend" % v.get("class"))
            if v.get("axis_names", 0) < 2:
                self.problems.append("<svg class=%s> with %d axis names (expected 2)" % (v.get("class"), v.get("axis_names", 0)))
            self.heatmap = None
            self.svg = None


def main():
    c = Check()
    with open(sys.argv[1], encoding="utf-8") as f:
        c.feed(f.read())
    c.close()
    if c.stack:
        c.problems.append("unclosed elements %s" % c.stack)
    if not c.doctype:
        c.problems.append("no <!DOCTYPE html>")
    unique = {k: len(set(v)) for k, v in c.cells.items()}
    print(json.dumps({"cells": {k: len(v) for k, v in sorted(c.cells.items())},
                      "unique_cells": dict(sorted(unique.items())),
                      "attn_cells": c.attn_cells, "svgs": c.svgs, "legends": c.legends,
                      "points": c.points, "sizes": c.sizes, "problems": c.problems},
                     sort_keys=True))


if __name__ == "__main__":
    main()
