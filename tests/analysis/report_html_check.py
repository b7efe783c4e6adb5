#!/usr/bin/python3
"""Strict structural check of an ember compare HTML report (used by report_html_test).

Prints one JSON object: heatmap cell counts per (part, metric), attention cells, and a list
of problems (unbalanced tags, scripts, external resources). Exit 0 always; the C++ test
asserts on the output.
"""
import json
import sys
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "source", "wbr"}


class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems = [], []
        self.heatmap = None
        self.cells, self.attn_cells, self.svgs, self.doctype = {}, 0, 0, False

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def _attrs(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "iframe", "object", "embed", "link"):
            self.problems.append("forbidden element <%s>" % tag)
        for k, v in attrs:
            if k.startswith("on"):
                self.problems.append("event handler attribute %s" % k)
            if k != "xmlns" and v and ("http:" in v or "https:" in v or v.startswith("//")):
                self.problems.append("external reference %s=%s" % (k, v))
        return a

    def handle_starttag(self, tag, attrs):
        a = self._attrs(tag, attrs)
        if tag == "svg":
            self.svgs += 1
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

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append("unbalanced </%s> (open: %s)" % (tag, self.stack[-3:]))
            return
        self.stack.pop()
        if tag == "svg":
            self.heatmap = None


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
                      "attn_cells": c.attn_cells, "svgs": c.svgs, "problems": c.problems},
                     sort_keys=True))


if __name__ == "__main__":
    main()
